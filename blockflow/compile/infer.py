"""Dtype and shape inference: types every node of a page in schedule order, numbering the slots
and building the steps of the Program (compiler.py drives it after checking blocks and wires).

Each problem is reported on its node through the compiler's ``error``/``warn``; a node that
fails (or whose inputs come from one that failed) gets no step, so nothing downstream is typed.
"""
from __future__ import annotations

import numpy as np

from blockflow.compile.attr_values import read_only
from blockflow.compile.program import Slot, Step, make_slot, make_step
from blockflow.datafiles import DataFileError
from blockflow.compile.dimensions import Dimensions
from blockflow.compile.dtypes import check_dtypes
from blockflow.compile.inferred import check_infer_result, declared_shape_mismatch, memo_key
from blockflow.compile.inferred import too_big as check_too_big
from blockflow.compile.wires import Wires
from blockflow.project import Edge, split_port
from blockflow.spec import ShapeError, TensorType
from blockflow.variables import VariableValues

__all__ = ["Inference", "read_only"]


class _Inputs:
    """What one node's inputs gave while typing it: the values ``infer`` is called with, the
    slots the step reads, and the rest of what its Step records."""

    __slots__ = ("args", "inputs", "static", "in_edges", "refs")

    def __init__(self):
        self.args, self.inputs, self.static, self.in_edges, self.refs = [], [], [], [], []

    def add(self, arg, slot, static=None):
        self.args.append(arg)
        self.inputs.append(slot)
        self.static.append(static)


_UNPLANNED = object()


class _Plain:
    """A block spec whose blocks _infer_plain types: (position, name) of its inputs, its output
    names, and the Step tuples all its steps share."""

    __slots__ = ("inputs", "outputs", "static", "out_decl", "placeholder")

    def __init__(self, inputs, outputs, static, out_decl, placeholder):
        self.inputs, self.outputs, self.static = inputs, outputs, static
        self.out_decl, self.placeholder = out_decl, placeholder


class Inference:
    """The tables a compile builds while typing nodes in order (slots, steps, ...)."""

    def __init__(self, page, files, report, ids, specs, attrs, fed: Wires, binders=None, deferred=None,
                 numbers=()):
        """``report``: what records problems (``error(node, port, message)``, ``warn``, and the
        ``failed`` set of nodes); ``ids``: the page's node ids by block number (page order);
        ``specs``/``attrs``: by block number, each block's spec and checked attrs (None for an
        unknown block); ``fed``: the good wires; ``numbers``: the ints 0..n-1 (shared); ``binders``:
        the composites' Input blocks, {flat id: instance}, whose types bind the instance's named
        dimensions; ``deferred``: nodes whose raw attrs use those dimensions (checked here)."""
        self.page, self.files, self.report = page, files, report
        self.dims = Dimensions(binders or {}, report, page)
        self.deferred = deferred or {}
        self.ids, self.nodes, self.numbers = ids, list(page.nodes.values()), numbers
        self.specs, self.attrs, self.fed = specs, attrs, fed
        #: (spec, id of its attrs dict, input types) -> output types: the blocks of every instance
        #: of a composite share one attrs dict (compiler._check_blocks), so an instance typed
        #: like one before it is typed by a look-up (1,000 instances: benchmarks/composites.py)
        self._typed: dict = {}
        self._dtypes_ok: set = set()    # (spec, input dtypes...) that check_dtypes passed
        self._types: dict = {}          # (shape, dtype) -> the first TensorType of no value typed
        self._tuples: dict = {}
        self._plans: dict = {}          # spec -> _Plain, or None: its blocks take the general path
        #: (spec, id of its attrs dict, ids of its input types) -> output types (_infer_plain)
        self._typed_by_id: dict = {}
        self._keep_alive: list = []     # the types those ids are of, so that no id is reused
        self.slots: list[Slot] = []
        # What a block gave, by block number: the output slots it numbered (what the Program's
        # port_slots, {(node, port): slot}, is made of when first asked) and its step (step_of).
        # A 100k-block page's dicts keyed by id are out of every cache, where a block's wires come
        # from blocks near it in page order, whose entries in these lists are in the cache.
        self.outs_at: list = [None] * len(ids)
        self.step_at: list = [None] * len(ids)
        self.steps: list[Step] = []
        self.variable_steps: list[Step] = []
        self.slot_values: dict[tuple[str, str], np.ndarray] = {}
        self.updaters: dict[tuple, str] = {}
        self.variable_values = VariableValues()
        self.feeds: dict[str, np.ndarray] = {}
        #: Variables whose value is stored in the project
        self.stored: set[str] = set()

    def infer_all(self, order) -> None:
        """Type every block, in ``order`` (block numbers). While no block failed, a plain block
        goes straight to the plain path (infer_node's first checks would pass it there)."""
        ids, specs, attrs, plans, failed = self.ids, self.specs, self.attrs, self._plans, self.report.failed
        deferred, plain, into = self.deferred, self._infer_plain, self.fed.into
        into.extend([None] * (len(ids) - len(into)))    # blocks the schedule's arcs added
        for i in order:
            plan = plans.get(specs[i])
            if (plan is None or failed or deferred and ids[i] in deferred
                    or not plain(i, ids[i], specs[i], plan, attrs[i])):
                self.infer_node(i)
            # Only a block's own typing reads its wire list: freed, its memory takes the next
            # blocks' Slots and Steps, in the cache, not new memory the system must map in
            into[i] = None

    def edge_types(self) -> dict[Edge, TensorType]:
        """The type each good wire carries, for wires into nodes that compiled."""
        types = {}
        failed, slots, port_slot = self.report.failed, self.slots, self._port_slot
        good, known, src = self.fed.good, self.fed.type, self.fed.src
        if not failed and all(known):    # a page that compiled, every block typed plainly (a type is truthy)
            return dict(zip(good, known))
        for e, t, si in zip(good, known, src):
            if t is None:
                idx = port_slot(si, e.src_port)
                t = None if idx is None else slots[idx].type
            if t is not None and (not failed or e.dst not in failed):
                types[e] = t
        return types

    def infer_node(self, i: int) -> None:
        """Type block number ``i`` and add its step; on a problem, report it and mark the node
        failed."""
        nid, spec, report, failed = self.ids[i], self.specs[i], self.report, self.report.failed
        if spec is None:
            failed.add(nid)
            return
        if failed:
            wired = self.fed.wires_into(i)
            if nid in failed or any(e.src in failed for e in wired):
                # Its own problem, or one upstream, is reported already; what is wrong with its
                # inputs is still worth saying now, so that every problem shows at once.
                failed.add(nid)
                self._check_inputs_present(nid, self.nodes[i], spec, [e.dst_port for e in wired])
                return
        if self.deferred and nid in self.deferred and not self._resolve_attrs(i, nid, spec):
            failed.add(nid)
            return
        attrs = self.attrs[i]
        plan = self._plans.get(spec, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = self._plans[spec] = self._plan(spec)
        if plan is not None and self._infer_plain(i, nid, spec, plan, attrs):
            return
        node = self.nodes[i]
        got = self._inputs(nid, node, spec)
        if got is None or not self._dtypes_fit(nid, spec, got):
            return
        outs = self._call_infer(nid, spec, got.args, attrs)
        if outs is None:
            return
        if spec.role == "variable":
            mismatch = declared_shape_mismatch(node, spec, attrs, outs[0])
            if mismatch:
                report.error(nid, None, mismatch)
                return
        out_slots, out_struct, out_decl = self._add_outputs(i, nid, spec, outs)
        if spec.role in ("variable", "placeholder") and not self._keep_value(nid, node, spec, outs, attrs):
            return
        outputs = tuple(out_slots)
        static = got.static
        # most steps have no static input and one plain output: their tuples are shared
        static = self._shared(static) if all(v is None for v in static) else tuple(static)
        struct = outputs if out_struct == out_slots else tuple(out_struct)
        step = make_step(len(self.steps), nid, spec, attrs, tuple(got.inputs), static,
                    outputs, tuple(got.in_edges), struct, self._shared(out_decl), tuple(got.refs))
        self.steps.append(step)
        self.step_at[i] = step
        if spec.role == "variable":
            self.variable_steps.append(step)
        if nid in self.dims.binders:
            self.dims.bind(nid, attrs, outs[0])
        for _, target in got.refs:
            if target in self.updaters:
                report.warn(nid, None, f"updates {target[1]}'s {target[0]} as {self.updaters[target]} does; "
                                       f"the later one in the schedule wins")
            self.updaters[target] = nid

    def _plan(self, spec) -> "_Plain | None":
        """What typing a block of ``spec`` by the plain path needs, or None when its blocks always
        take the general one (lists in or out, static or state inputs, Variables, file readers)."""
        if spec.refs or spec.infer_context or spec.role == "variable":
            return None
        if any(d.variadic or d.static or d.ref for d in spec.inputs) or any(d.variadic for d in spec.outputs):
            return None
        n_in, n_out = len(spec.inputs), len(spec.outputs)
        return _Plain(tuple((pos, d.name) for pos, d in enumerate(spec.inputs)),
                      tuple(d.name for d in spec.outputs), self._shared((None,) * n_in),
                      self._shared(range(n_out)), spec.role == "placeholder")

    def _infer_plain(self, i, nid, spec, plan, attrs) -> bool:
        """Type a block whose every input is wired from a typed output (most blocks of a big page)
        as the general path would; False, with nothing done, for any other (it reports why).
        A block whose spec, attrs dict and input type objects are those of one typed before is
        typed by one look-up: that block's dtypes passed their check and its infer gave these."""
        slots, good, wire_type, src, outs_at = self.slots, self.fed.good, self.fed.type, self.fed.src, self.outs_at
        wired = self.fed.into[i]     # one wire's place, a tuple or list of them, or None (wires.py)
        wired = () if wired is None else (wired,) if type(wired) is int else wired
        if len(wired) != len(plan.inputs):
            return False     # an input is not wired (each wire goes to a declared input, one each)
        inputs, args, in_edges, ids = [], [], [], [spec, id(attrs)]
        for pos, name in plan.inputs:
            for g in wired:
                e = good[g]
                if e.dst_port == name:
                    break
            else:
                return False
            outs = outs_at[src[g]]    # the source's output slots: near block i in page order
            if outs is None:
                return False
            port = e.src_port
            for idx in outs:
                s = slots[idx]
                if s.port == port:
                    break
            else:
                return False
            t = s.type
            wire_type[g] = t     # what the wire carries, whatever types the block
            inputs.append(idx)
            args.append(t)
            in_edges.append((pos, None, e))
            ids.append(id(t))
        outs = self._typed_by_id.get(ids := tuple(ids))
        if outs is None:
            outs = self._plain_miss(nid, spec, plan, attrs, ids, args, inputs, in_edges)
            if outs is None:
                return True      # reported
        outputs = []
        numbers = self.numbers
        for name, t in zip(plan.outputs, outs):
            idx = len(slots)
            if idx < len(numbers):
                idx = numbers[idx]     # an int made once, not one more object (see compiler)
            slots.append(make_slot(idx, nid, name, t))
            outputs.append(idx)
        # (an empty table is asked nothing: hashing nid reads its string, out of the cache)
        if plan.placeholder and self.page.feeds and nid in self.page.feeds:
            self.feeds[nid] = read_only(np.asarray(self.page.feeds[nid]))
        outs_at[i] = outputs = tuple(outputs)
        k = len(self.steps)
        step = make_step(numbers[k] if k < len(numbers) else k, nid, spec, attrs, tuple(inputs), plan.static,
                         outputs, tuple(in_edges), outputs, plan.out_decl, ())
        self.steps.append(step)
        self.step_at[i] = step
        binders = self.dims.binders
        if binders and nid in binders:   # a composite's Input or Output: its named dimensions
            self.dims.bind(nid, attrs, outs[0])
        return True

    def _plain_miss(self, nid, spec, plan, attrs, ids, args, inputs, in_edges):
        """The output types of a plain block no look-up knew: its dtypes checked and its infer
        called, as the general path does (None when either refused: reported)."""
        got = _Inputs()
        got.args, got.inputs, got.static, got.in_edges = args, inputs, list(plan.static), in_edges
        if not self._dtypes_fit(nid, spec, got):
            return None
        outs = self._call_infer(nid, spec, args, attrs)
        if outs is not None and all(t.value is None for t in args):   # a known value: by content only
            self._typed_by_id[ids] = outs
            self._keep_alive.append(args)
        return outs

    def _port_slot(self, i: int, port: str):
        """The slot of block number ``i``'s output ``port``, or None (not typed, or no such port)."""
        slots = self.slots
        for idx in self.outs_at[i] or ():
            if slots[idx].port == port:
                return idx
        return None

    def port_slot(self, nid: str, port: str):
        """The slot of ``nid``'s output ``port``, or None."""
        i = self.fed.index.get(nid)
        return None if i is None else self._port_slot(i, port)

    def _step_of(self, nid: str):
        """The step of ``nid``, or None when it has none (yet)."""
        i = self.fed.index.get(nid)
        return None if i is None else self.step_at[i]

    def _shared(self, items) -> tuple:
        """One tuple object for equal tuples of small hashable things (Nones, indices)."""
        t = tuple(items)
        return self._tuples.setdefault(t, t)

    def _dtypes_fit(self, nid, spec, got) -> bool:
        """check_dtypes, skipped for a block whose wired inputs' dtypes were checked before (every
        instance of a composite after the first); inline constants are always checked (cast)."""
        slots, key = self.slots, [spec]
        for s in got.inputs:
            if s is None:
                key.append(None)
                continue
            for i in (s if type(s) is tuple else (s,)):
                slot = slots[i]
                if slot.const:
                    return check_dtypes(self.report, nid, spec, got.args, got.inputs, slots)
                key.append(slot.type.dtype)
            if type(s) is tuple:
                key.append(len(s))
        key = tuple(key)
        if key in self._dtypes_ok:
            return True
        ok = check_dtypes(self.report, nid, spec, got.args, got.inputs, slots)
        if ok:
            self._dtypes_ok.add(key)
        return ok

    def _resolve_attrs(self, i, nid, spec) -> bool:
        """Put the sizes of the dimensions a node's attrs name in them, and check the attrs."""
        values = self.dims.checked_attrs(nid, spec, self.deferred[nid])
        if values is None:
            return False
        self.attrs[i] = values
        return True

    # ------------------------------------------------------------------------------ inputs

    def _inputs(self, nid, node, spec) -> _Inputs | None:
        """Every input's slot and type (None when one cannot be fed: reported)."""
        var_node = None
        if spec.refs:
            var_node = self._state_owner(nid, spec)
            if var_node is None:
                return None
        got = _Inputs()
        bad = False
        for pos, decl in enumerate(spec.inputs):
            if decl.ref:
                ok = self._ref_input(got, pos, nid, node, spec, decl, var_node)
            elif decl.variadic:
                ok = self._variadic_input(got, pos, nid, node, decl)
            else:
                ok = self._single_input(got, pos, nid, node, decl)
            bad = bad or not ok
        return None if bad else got

    def _state_owner(self, nid, spec) -> str | None:
        """The Variable whose state a state-updating block changes: the one wired to its first ref
        input (None when it is not a Variable: reported)."""
        first = spec.refs[0]
        e = self.fed.get((nid, first))
        src = self._step_of(e.src) if e is not None else None
        if src is None or src.role != "variable":
            self.report.error(nid, first, f"input '{first}' must be wired straight from a Variable: it is "
                                          f"the state {spec.name} updates")
            return None
        return e.src

    def _ref_input(self, got, pos, nid, node, spec, decl, var_node) -> bool:
        r = self._ref_slot(nid, node, spec, decl, var_node)
        if r is None:
            return False
        slot, target = r
        got.refs.append((decl.name, target))
        got.add(self.slots[slot].type, slot)
        got.in_edges.append((pos, None, self.fed.get((nid, decl.name))))
        return True

    def _variadic_input(self, got, pos, nid, node, decl) -> bool:
        """An InputList: its ports must fill up in order from 0, at least ``min_count`` of them."""
        error = self.report.error
        indices = [i for base, i in map(split_port, self.fed.ports(nid)) if base == decl.name]
        inline_idx = sorted(split_port(p)[1] for p in node.inputs if split_port(p)[0] == decl.name)
        present = sorted(set(indices) | set(inline_idx))
        if present != list(range(len(present))):
            missing = next(i for i in range(len(present) + 1) if i not in present)
            error(nid, decl.port(missing), f"{decl.port(missing)} is empty; variadic inputs "
                                           f"fill up in order from {decl.port(0)}")
            return False
        if len(present) < decl.min_count:
            error(nid, decl.port(len(present)),
                  f"'{decl.name}' needs at least {decl.min_count} inputs, has {len(present)}")
            return False
        group = []
        ok = True
        for i in present:
            r = self._input_slot(nid, node, decl, decl.port(i))
            if r is None:
                ok = False
                continue
            group.append(r)
            got.in_edges.append((pos, len(group) - 1, self.fed.get((nid, decl.port(i)))))
        got.add([t for _, t in group], tuple(s for s, _ in group))
        return ok

    def _single_input(self, got, pos, nid, node, decl) -> bool:
        r = self._input_slot(nid, node, decl, decl.name)
        if r is None:
            return False
        slot, t = r
        if decl.static:
            value = None if t is None else t.value
            if t is not None and value is None:
                self.report.error(nid, decl.name, f"input '{decl.name}' must be known before running: give it "
                                                  f"an inline value or wire a Const into it")
                return False
        else:
            value = None
        # Appended here rather than through _Inputs.add: this is the path most inputs take.
        got.args.append(t if value is None else value)
        got.inputs.append(slot)
        got.static.append(value)
        if slot is not None:
            got.in_edges.append((pos, None, self.fed.get((nid, decl.name))))
        return True

    def _input_slot(self, nid, node, decl, port):
        """(slot index or None, TensorType or None) for one input port; None when it cannot be fed."""
        slots = self.slots
        e = self.fed.get((nid, port))
        if e is not None:
            si = self.fed.index[e.src]
            idx = self._port_slot(si, e.src_port)
            if idx is None:
                n = len(self.outs_at[si] or ())
                self.report.error(nid, port, f"wire {e} starts at '{e.src_port}', which {e.src} does not have "
                                             f"(it has {n} output{'s' if n != 1 else ''})")
                return None
            return idx, slots[idx].type
        if port in node.inputs:
            value = read_only(np.asarray(node.inputs[port]))
            t = TensorType.of(value)
        elif decl.optional:
            if decl.default is None:
                return None, None
            t = TensorType.of(np.asarray(decl.default))
        else:
            self.report.error(nid, port, f"input '{port}' is not connected and has no inline value")
            return None
        idx = len(slots)
        slots.append(make_slot(idx, nid, port, t, True))
        return idx, t

    def _ref_slot(self, nid, node, spec, decl, var_node):
        """(slot, state target) for a ref input: a wired Variable, or a slot kept with ``var_node``."""
        error, slots = self.report.error, self.slots
        e = self.fed.get((nid, decl.name))
        if e is not None:
            src = self._step_of(e.src)
            if src is None or src.role != "variable":
                error(nid, decl.name, f"input '{decl.name}' must be wired straight from a Variable")
                return None
            idx = self._port_slot(self.fed.index[e.src], e.src_port)
            if idx is None:
                raise KeyError((e.src, e.src_port))   # as the dict look-up it replaced did
            return idx, ("value", e.src)
        if decl.slot is None:
            error(nid, decl.name, f"input '{decl.name}' must be wired from a Variable")
            return None
        var_type = slots[self._step_of(var_node).outputs[0]].type
        shape = var_type.shape if decl.slot == "like" else ()
        key = f"{nid}.{decl.name}"
        value = self._first_state(nid, node, spec, decl, var_node, key, TensorType(shape, var_type.dtype))
        if value is None:
            return None
        self.slot_values[(var_node, key)] = read_only(value)
        idx = len(slots)
        slots.append(make_slot(idx, var_node, key, TensorType(shape, var_type.dtype), False, True))
        return idx, (key, var_node)

    def _first_state(self, nid, node, spec, decl, var_node, key, want: TensorType):
        """A block's slot state as a run sequence starts: saved in the project, or its first value
        (None when neither can be had: reported)."""
        stored = self.page.nodes[var_node].state.get(key)
        if stored is not None:
            if stored.shape != want.shape or stored.dtype != want.dtype:
                self.report.error(nid, decl.name, f"the saved state {var_node}/{key} is {TensorType.of(stored)}, "
                                                  f"expected {want}")
                return None
            return stored
        init = decl.slot_init
        if isinstance(init, str):
            init = self._known_value(nid, node, spec, init)
            if init is None:
                self.report.error(nid, init, f"the first value of the '{decl.name}' state comes from input "
                                             f"'{decl.slot_init}', which must then be a constant")
                return None
        return np.full(want.shape, init, dtype=want.dtype)

    def _known_value(self, nid, node, spec, name):
        """The compile-time value of an input (inline, a wired Const, or its default), or None."""
        e = self.fed.get((nid, name))
        if e is not None:
            idx = self._port_slot(self.fed.index[e.src], e.src_port)
            return None if idx is None else self.slots[idx].type.value
        if name in node.inputs:
            return node.inputs[name]
        return spec.input_map[name].default

    def _check_inputs_present(self, nid, node, spec, fed_ports) -> None:
        """Report required inputs with neither a wire nor an inline value (no types needed)."""
        given = {split_port(p)[0] for p in fed_ports} | {split_port(p)[0] for p in node.inputs}
        for decl in spec.inputs:
            if decl.optional or decl.name in given or (decl.variadic and decl.min_count == 0):
                continue
            if decl.ref and decl.slot is not None:
                continue
            port = decl.port(0) if decl.variadic else decl.name
            self.report.error(nid, port, f"input '{port}' is not connected and has no inline value")

    # ----------------------------------------------------------------------------- outputs

    def _call_infer(self, nid, spec, args, attrs):
        """The block's output types, checked (None when its infer refused or misbehaved: reported)."""
        key = memo_key(spec, attrs, args)
        if key is not None:
            outs = self._typed.get(key)
            if outs is not None:
                return outs
        outs = self._infer_checked(nid, spec, args, attrs)
        if outs is not None:
            outs = self._interned(outs)
        if key is not None and outs is not None:   # a failure is reported on each node anew
            self._typed[key] = outs
        return outs

    def _interned(self, outs: tuple) -> tuple:
        """``outs`` with each type of no known value replaced by the first equal one typed: the
        blocks fed by each instance's own Variable (its attrs its own, by its seed) then see the
        type objects the first instance's saw, and are typed by _infer_plain's look-up."""
        types = self._types
        return tuple(types.setdefault((t.shape, t.dtype), t) if type(t) is TensorType and t.value is None else t
                     for t in outs)

    def _infer_checked(self, nid, spec, args, attrs):
        error = self.report.error
        try:
            if spec.infer_context:
                result = spec.infer(*args, **attrs, files=self.files)
            else:
                result = spec.infer(*args, **attrs)
        except (ShapeError, DataFileError) as exc:
            error(nid, None, str(exc))
            return None
        except Exception as exc:  # a bug in the block's infer: report it on the node
            error(nid, None, f"{spec.name}.infer failed: {type(exc).__name__}: {exc}")
            return None
        outs = result if isinstance(result, tuple) and len(spec.outputs) != 1 else (result,)
        problem = check_infer_result(spec, outs, attrs, args)
        if problem:
            error(nid, None, f"{spec.name}.infer returned {result!r}: {problem}")
            return None
        too_big = check_too_big(spec, outs)
        if too_big:
            error(nid, too_big[0], too_big[1])
            return None
        return outs

    def _add_outputs(self, i, nid, spec, outs):
        """Number the output slots: (flat slots, per declared output a slot or a tuple of them,
        per flat slot its declared output)."""
        slots = self.slots
        out_slots, out_struct, out_decl = [], [], []
        for k, (decl, t) in enumerate(zip(spec.outputs, outs)):
            group = []
            for j, tt in enumerate(t if decl.variadic else (t,)):
                port = decl.port(j) if decl.variadic else decl.name
                idx = len(slots)
                slots.append(make_slot(idx, nid, port, tt))
                out_slots.append(idx)
                out_decl.append(k)
                group.append(idx)
            out_struct.append(tuple(group) if decl.variadic else group[0])
        # numbered even when the block then fails (a Variable's stored value of the wrong type):
        # its ports stay typed, as they were in the port_slots dict this replaced
        self.outs_at[i] = tuple(out_slots)
        return out_slots, out_struct, out_decl

    def _keep_value(self, nid, node, spec, outs, attrs) -> bool:
        """Take a Variable's stored value (or arrange its first one) or a Placeholder's saved feed;
        False when a stored value does not fit its type (reported)."""
        if spec.role == "variable":
            value = node.state.get("value")
            if value is None:   # drawn when a run first needs it, never while compiling
                self.variable_values.add_pending(nid, spec, attrs, outs[0], f"{self.page.scope}/{nid}")
            elif value.shape != outs[0].shape or value.dtype != outs[0].dtype:
                self.report.error(nid, None, f"stored value is {TensorType.of(value)} but the Variable is "
                                             f"declared {outs[0]}")
                return False
            else:
                self.stored.add(nid)
                self.variable_values[nid] = read_only(value)
        elif spec.role == "placeholder" and nid in self.page.feeds:
            self.feeds[nid] = read_only(np.asarray(self.page.feeds[nid]))
        return True

