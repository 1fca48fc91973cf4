"""The straight-line code generator: one kind of run (which steps run forward, which backward,
what is returned) lowered to a plain Python function that calls the blocks' numpy functions.

The hot path touches no dicts and no networkx: slots become locals (``s3`` a value, ``g3`` its
gradient), block functions and constants are bound in the function's namespace. Only slot
numbers and references to block functions enter that code, never text from a project. Every
line also says what the names it binds hold, for the memory plan (memplan.py).
"""
from __future__ import annotations

import keyword
import math
import mmap
from dataclasses import dataclass
from functools import partial

import numpy as np

from blockflow.compile.gradpaths import GradientPaths
from blockflow.compile.program import Program, Step
from blockflow.project import Edge
from blockflow.run.memplan import RESIDENT, Line, MemoryPlan, alias, new, value_dependent
from blockflow.run.memplan import parts as memparts
from blockflow.spec import TensorType

__all__ = ["KeptArrays", "Lowered", "lower", "parts_of_updates"]

#: call a block's ``forward.ufunc`` directly (off: the block's own forward; the tests compare)
BIND_UFUNCS = True
#: write a block's attrs as keywords into its call (off: a functools.partial; the tests compare)
DIRECT_KEYWORDS = True
#: write large elementwise outputs through ``out=B[k]``, so that a run may keep them for the
#: next (which runs keep them: runtime._Plan.take_buffers; docs/performance.md)
REUSE_BUFFERS = True
#: add a large gradient into a vjp's own new array (off: ``a + b``, a new array)
ADD_IN_PLACE = True
#: let the run's backward take a Gradients block's cotangents, scaled, where they are its own
#: (see _Writer.shared_cotangents; off: the backward computes them again)
SHARE_GRADIENTS = True
#: the smallest value (in elements) worth a kept buffer: below it malloc reuses freed memory
#: anyway; above it a fresh array is fresh pages, faulted in and zeroed by the kernel every run
REUSE_MIN_SIZE = 1 << 16
#: the most bytes a plan keeps in buffers between runs
REUSE_MAX_BYTES = 256 << 20


@dataclass
class Lowered:
    """A lowered run: ``fn(V, F, G0, D, _G, B)`` returns (values, grads, edge grads, updates),
    four tuples in the order of ``value_keys``, ``grad_keys``, ``edge_list`` and ``update_steps``.

    ``B`` holds ``n_buffers`` arrays the large elementwise steps write into: a KeptArrays (None
    until a run has made them, then kept), or a plain list of Nones for a run that keeps none."""

    fn: object
    n_buffers: int
    #: bytes of each of them
    buffer_bytes: list
    source: str
    memory: MemoryPlan
    value_slots: list
    grad_slots: list
    value_keys: list
    grad_keys: list
    #: (node, (node, port)) for the gradients the caller wants by node
    wanted_keys: list
    target_key: tuple | None
    edge_list: list
    update_steps: list
    #: (Gradients node, the PreventGradient nodes in its way) when a Gradients block hit one
    prevented_by_gradients: tuple | None


def lower(program: Program, *, fwd, bwd, paths, target, fetch, record, wanted_grads, var_steps,
          feed_steps, state_slots, fail, rng, where) -> Lowered:
    """Generate and compile the function for one kind of run.

    ``fwd``/``bwd``: the steps to run forward, and backward (in reverse order); ``paths``: the
    GradientPaths of ``target`` (a slot, or None for a forward pass); ``record``: return every
    value and each wire's gradient, else only ``fetch``, the target and the ``wanted_grads``
    ((node, slot) pairs); ``var_steps``/``feed_steps``/``state_slots``: the order of V and F;
    ``fail(n, exc, locals)``, ``rng(index, data)`` and ``where(at)`` are the plan's failure
    handler, random streams and cursor names.
    """
    w = _Writer(program, fail, rng)
    if REUSE_BUFFERS and not record:
        w.reusable = _reusable_slots(program, fwd, set(fetch) | ({target} if target is not None else set()))
    update_names = w.forward(fwd, var_steps, feed_steps, state_slots)
    edge_names: list[tuple[str, Edge]] = []
    grad_written: set[int] = set()
    if target is not None:
        t = target
        w.lines.append(Line(f"_n = -1; g{t} = G0 if G0 is not None else _ones(s{t})", {f"s{t}"}, {f"g{t}"},
                            ((f"g{t}", new(t, "the gradient seed")),), -1))
        if SHARE_GRADIENTS and not record and w.shares:
            w.shared = w.shared_cotangents(paths, bwd, t)
        w.wanted = {s for _, s in wanted_grads}
        grad_written = w.backward(paths, bwd, {t}, "g", edge_names if record else None)
    if record:
        value_slots = [o for st in fwd for o in st.outputs]
        grad_slots = sorted(grad_written)
    else:
        value_slots = sorted(set(fetch) | ({target} if target is not None else set()))
        grad_slots = [s for _, s in wanted_grads]
    fn, source, body, at_line = w.compile(value_slots, grad_slots, edge_names, update_names, record)
    slots = program.slots
    key = lambda i: (slots[i].node, slots[i].port)  # noqa: E731
    memory = MemoryPlan(program, body, _fixed_inputs(program, var_steps, state_slots, w.ns),
                        [(st.outputs[0], f"the feed of {program.full_name(st.node)}") for st in feed_steps],
                        where, fn.__code__, at_line)
    return Lowered(fn, len(w.buffers), [_nbytes(slots[o].type) for o in w.buffers], source, memory,
                   value_slots, grad_slots, [key(i) for i in value_slots],
                   [key(i) for i in grad_slots], [(node, key(i)) for node, i in wanted_grads],
                   None if target is None else key(target), [e for _, e in edge_names],
                   [st for _, st in update_names], w.prevented_by_gradients)


def _fixed_inputs(program, var_steps, state_slots, ns):
    """What every run of this kind is handed, as (label, bytes): Variables, slot state, constants."""
    slots = program.slots
    fixed = [(f"the Variable {program.full_name(st.node)} {slots[st.outputs[0]].type}",
              _nbytes(slots[st.outputs[0]].type)) for st in var_steps]
    fixed += [(f"the state {program.full_name(slots[s].node)}.{slots[s].port} {slots[s].type}",
               _nbytes(slots[s].type)) for s in state_slots]
    fixed.append(("the constants", sum(getattr(v, "nbytes", 0) for k, v in ns.items()
                                       if k[0] in "ck" and k[1:2].isdigit())))
    return fixed


class _Writer:
    """The lines of one generated function and the namespace they run in."""

    def __init__(self, program: Program, fail, rng):
        self.program = program
        self.slots = program.slots
        self.ns: dict = {"_fail": fail, "_ones": np.ones_like, "_zeros": np.zeros_like, "_R": rng,
                         "_FILES": program.files, "_iadd": _iadd, "_keep": _keep}
        self.lines: list[Line] = []  # code, names read and written, what they hold, the step cursor
        self.prevented_by_gradients = None
        #: slots whose arrays are kept across runs (_reusable_slots), and the buffer index of each
        self.reusable: set = set()
        self.buffers: dict[int, int] = {}
        #: cotangent names holding an array no other name or caller can see (see _accumulate)
        self.owned: set = set()
        #: what each Gradients block differentiated: (step index, its ys slot, its cotangents'
        #: prefix, its GradientPaths, the slots it wrote a cotangent for)
        self.shares: list = []
        #: {slot: (ys slot, prefix)} whose cotangent in the run's backward is the Gradients
        #: block's scaled (shared_cotangents); the slots whose gradients the run returns
        self.shared: dict = {}
        self.wanted: set = set()

    def arg(self, slot):
        """(expression, names read) for reading a slot: a local, or a constant bound in ns."""
        if slot is None:
            return "None", set()
        if self.slots[slot].const:
            name = f"c{slot}"
            self.ns[name] = self.slots[slot].type.value
            return name, set()
        return f"s{slot}", {f"s{slot}"}

    def call_args(self, st: Step):
        """(argument expressions, names read) for calling a step's block on its inputs."""
        parts, reads = [], set()
        for pos, src in enumerate(st.inputs):
            if st.static[pos] is not None:
                name = f"k{st.index}_{pos}"
                self.ns[name] = st.static[pos]
                parts.append(name)
            elif isinstance(src, tuple):
                items = [self.arg(s) for s in src]
                parts.append("[" + ", ".join(a for a, _ in items) + "]")
                for _, r in items:
                    reads |= r
            else:
                a, r = self.arg(src)
                parts.append(a)
                reads |= r
        return parts, reads

    # ---------------------------------------------------------------------------- forward

    def forward(self, fwd, var_steps, feed_steps, state_slots):
        """Lines for the forward steps; returns (update name, step) for state-updating blocks."""
        lines = self.lines
        var_index = {st.index: i for i, st in enumerate(var_steps)}
        feed_index = {st.index: i for i, st in enumerate(feed_steps)}
        # Slot state (optimizer moments...) is read like a Variable, after the Variables in V.
        for i, s in enumerate(state_slots):
            lines.append(Line(f"s{s} = V[{len(var_steps) + i}]", set(), {f"s{s}"}, ((f"s{s}", RESIDENT),)))
        update_names = []
        for st in fwd:
            outs = [f"s{o}" for o in st.outputs]
            if st.role == "variable":
                lines.append(Line(f"{outs[0]} = V[{var_index[st.index]}]", set(), set(outs), ((outs[0], RESIDENT),)))
            elif st.role == "gradients":
                self.gradients_block(st)
            elif st.role == "placeholder":   # the feed, converted to the Placeholder's dtype already
                fname, kw = self._bind_forward(st)
                args = ", ".join([f"F[{feed_index[st.index]}]"] + kw)
                lines.append(Line(f"_n = {st.index}; {outs[0]} = {fname}({args})",
                                  set(), set(outs), ((outs[0], RESIDENT),), st.index))
            else:
                self._block_call(st, update_names)
        return update_names

    def _bind_forward(self, st: Step) -> tuple[str, list]:
        """(the name a step's forward is bound to, the keyword arguments to call it with)."""
        fname = f"f{st.index}"
        fn = st.spec.forward
        # An elementwise block whose forward only calls a ufunc (math_unary, Add...) names it as
        # ``forward.ufunc``: calling the ufunc itself saves a Python frame per block and run,
        # a tenth of a tiny op's cost, with the same result.
        ufunc = getattr(fn, "ufunc", None)
        if BIND_UFUNCS and ufunc is not None and not st.attrs and not st.spec.forward_context:
            fn = ufunc
        fn, kw = self._keywords(fn, st.attrs, fname)
        self.ns[fname] = fn
        return fname, kw

    def _keywords(self, fn, kw: dict, prefix: str):
        """(function, ["name=bound value", ...]) calling ``fn`` with ``kw``: keywords written into
        the call cost a third of a functools.partial's (0.08 against 0.24 us). The names are the
        block's declared attrs (and ``needs``), never text from a project; the values are bound
        in the namespace. Anything else goes through a partial."""
        if not kw:
            return fn, []
        if not DIRECT_KEYWORDS or not all(k.isidentifier() and not keyword.iskeyword(k) for k in kw):
            return partial(fn, **kw), []
        parts = []
        for i, (k, v) in enumerate(kw.items()):
            name = f"{prefix}_a{i}"
            self.ns[name] = v
            parts.append(f"{k}={name}")
        return fn, parts

    def _block_call(self, st: Step, update_names) -> None:
        """One block's forward call, and for a value-dependent block the report of what it made."""
        slots = self.slots
        fname, kw = self._bind_forward(st)
        outs = [f"s{o}" for o in st.outputs]
        parts, reads = self.call_args(st)
        parts += kw
        if "rng" in st.spec.forward_context:
            parts.append(f"rng=_R({st.index}, D)")
        if "data" in st.spec.forward_context:
            parts.append("data=D")
        if "files" in st.spec.forward_context:
            parts.append("files=_FILES")
        target = _struct_expr(st, "s", lambda o: True, assign=True) if outs else "_"
        keep = ""
        if len(st.outputs) == 1 and st.outputs[0] in self.reusable:
            # the first run makes the array (with numpy's own dtype and shape), later runs write into it
            k = self.buffers.setdefault(st.outputs[0], len(self.buffers))
            parts.append(f"out=B[{k}]")
            keep = f"; B[{k}] = B[{k}] if B[{k}] is not None else _keep({target}, B)"
        writes = set(outs)
        binds = [(f"s{o}", new(o, f"output '{slots[o].port}'")) for o in st.outputs]
        if st.refs:
            target = f"({target}, u{st.index})"
            writes.add(f"u{st.index}")
            update_names.append((f"u{st.index}", st))
            binds.append((f"u{st.index}", parts_of_updates(st, slots)))
        self.lines.append(Line(f"_n = {st.index}; {target} = {fname}({', '.join(parts)}){keep}", reads, writes,
                               tuple(binds), st.index))
        if outs and value_dependent(self.program, st):
            self.lines.append(Line(f"_G.seen({st.index}, ({', '.join(outs)},))", set(outs), set()))

    # --------------------------------------------------------------------------- backward

    def backward(self, paths, bwd, seeded, gp, edge_names):
        """Reverse-mode code over ``bwd`` (steps in reverse order) from the cotangents already in
        ``{gp}{slot}`` for the ``seeded`` slots; returns the slots that got a cotangent. With
        ``edge_names`` each wire's share is kept under a name of its own (the editor shows it)."""
        grad_written = set(seeded)
        shared = self.shared if gp == "g" and edge_names is None else {}
        for st in bwd:
            needs_flat = [bool(paths.needs.get((st.index, j))) and st.flat_input(j) not in shared
                          for j in range(len(st.in_edges))]
            if not any(needs_flat):
                continue
            for o in st.outputs:
                if o in shared and o not in grad_written:
                    self._scaled_share(o, st.index, grad_written)
            if not any(o in grad_written for o in st.outputs):
                continue
            r = self._vjp_call(st, gp, grad_written, needs_flat)
            for j, (pos, idx, edge) in enumerate(st.in_edges):
                if needs_flat[j]:
                    self._accumulate(st, j, r, gp, grad_written, edge_names)
        for o in sorted(self.wanted & shared.keys() - grad_written):  # a Placeholder's, a Variable's
            self._scaled_share(o, -1, grad_written)
        return grad_written

    def _scaled_share(self, o: int, producer: int, grad_written) -> None:
        """``g{o} = g{L} * {prefix}{o}``: the run's cotangent of ``o`` from the Gradients block's."""
        y, prefix = self.shared[o]
        self.lines.append(Line(f"g{o} = g{y} * {prefix}{o}", {f"g{y}", f"{prefix}{o}"}, {f"g{o}"},
                               ((f"g{o}", new(o, f"the gradient of '{self.slots[o].node}:{self.slots[o].port}'")),),
                               -2 - producer if producer >= 0 else -1))
        grad_written.add(o)
        self.owned.add(f"g{o}")  # a product is a new array

    def shared_cotangents(self, paths, bwd, target) -> dict:
        """The slots whose cotangent in the run's backward is a Gradients block's times one number.

        A Gradients block on a scalar ``L`` (seeded with ones) has computed, during the forward,
        ``h(s) = dL/ds`` for the slots ``s`` between its xs and ``L``. When the run's gradient
        reaches ``s`` only through ``L`` (every wire out of ``s`` that carries the run's gradient
        carries the block's, and the other way round, into a step whose outputs all qualify),
        linearity gives ``g(s) = g(L) * h(s)``: one product instead of the backward through the
        same blocks again (FGSM's clean loss: the tf.gradients of the input and the training
        step's gradient share that pass, as a hand-written numpy step does). The product is the
        same number as the repeated pass where ``g(L)`` is a power of two, and otherwise differs
        only in rounding."""
        slots, steps = self.slots, self.program.steps
        written = self._cotangents_written(paths, bwd, target)
        readers: dict[int, list] = {}
        for st in steps:
            for j in range(len(st.in_edges)):
                src = st.flat_input(j)
                if src is not None:
                    readers.setdefault(src, []).append((st, j))
        out: dict = {}
        for index, y, prefix, inner, inner_written in self.shares:
            if y not in written or y == target or slots[y].type.shape != ():
                continue
            dtype = slots[y].type.dtype
            mine = {y}
            for st in reversed(steps[:index]):
                for o in st.outputs:
                    if (o in inner_written and o in written and o != target and slots[o].type.dtype == dtype
                            and self._only_through(o, index, paths, inner, readers, written, inner_written, mine)):
                        mine.add(o)
            mine.discard(y)
            if mine & out.keys():   # two Gradients blocks over the same slots: share neither
                return {}
            out.update((o, (y, prefix)) for o in mine)
        return out

    @staticmethod
    def _only_through(o, index, paths, inner, readers, written, inner_written, mine) -> bool:
        """Whether the run's gradient and the Gradients block's (before step ``index``) leave
        slot ``o`` along the same wires, into steps whose cotangents are all in ``mine``."""
        for st, j in readers.get(o, ()):
            outer = bool(paths.needs.get((st.index, j)))
            if outer != (st.index < index and bool(inner.needs.get((st.index, j)))):
                return False
            if outer and not all((o2 in written) == (o2 in inner_written) and (o2 not in written or o2 in mine)
                                 for o2 in st.outputs):
                return False
        return True

    @staticmethod
    def _cotangents_written(paths, bwd, target) -> set:
        """The slots the run's backward gives a cotangent (as backward() will, without sharing)."""
        written = {target}
        for st in bwd:
            if any(o in written for o in st.outputs):
                for j in range(len(st.in_edges)):
                    if paths.needs.get((st.index, j)):
                        written.add(st.flat_input(j))
        return written

    def _vjp_call(self, st: Step, gp, grad_written, needs_flat) -> str:
        """The line calling a block's vjp; returns the name of its result (one part per input)."""
        spec = st.spec
        reads = {f"{gp}{o}" for o in st.outputs if o in grad_written} | {f"s{o}" for o in st.outputs}
        gexpr = _struct_expr(st, gp, grad_written.__contains__)
        oexpr = _struct_expr(st, "s", lambda o: True)
        parts, r2 = self.call_args(st)
        if "rng" in spec.vjp_context:
            parts.append(f"rng=_R({st.index}, D)")
        reads |= r2
        kw = dict(st.attrs)
        if "needs" in spec.vjp_context:
            kw["needs"] = _needs_by_input(st, needs_flat)
        bname = f"b{st.index}_{len(self.ns)}"
        self.ns[bname], kwparts = self._keywords(spec.vjp, kw, bname)
        parts += kwparts
        r = f"{gp}r{st.index}"
        at = -2 - st.index
        made = []
        for j, (pos, idx, _) in enumerate(st.in_edges):
            if needs_flat[j]:
                decl = spec.inputs[pos]
                port = decl.port(idx) if idx is not None else decl.name
                made.append(((pos, idx), st.flat_input(j), f"the gradient of input '{port}'"))
        self.lines.append(Line(f"_n = {at}; {r} = {bname}({gexpr}, {oexpr}, {', '.join(parts)})",
                               reads, {r}, ((r, memparts(made)),), at))
        return r

    def _accumulate(self, st: Step, j: int, r: str, gp, grad_written, edge_names) -> None:
        """Add the vjp's part for flat input ``j`` to its source slot's cotangent (kept under a
        wire's own name first when ``edge_names`` records wires)."""
        pos, idx, edge = st.in_edges[j]
        src = st.flat_input(j)
        expr, read, held = (f"{r}[{pos}]" if idx is None else f"{r}[{pos}][{idx}]"), r, alias(r, (pos, idx))
        if edge_names is not None and edge is not None:
            ename = f"e{len(edge_names)}"
            edge_names.append((ename, edge))
            self.lines.append(Line(f"{ename} = {expr}", {r}, {ename}, ((ename, held),)))
            expr, read, held = ename, ename, alias(ename)
        name = f"{gp}{src}"
        if src in grad_written:
            slot = self.slots[src]
            # A sum of large cotangents goes into the first one's array when the plan alone holds
            # it (_iadd checks shapes and dtypes at run time): a pass over fresh pages saved.
            add = (f"_iadd({name}, {expr})" if name in self.owned and _nbytes(slot.type) >= REUSE_MIN_SIZE * 4
                   else f"{name} + {expr}")
            self.lines.append(Line(f"{name} = {add}", {name, read}, {name},
                                   ((name, new(src, f"the gradient summed over the wires of "
                                                    f"'{slot.node}:{slot.port}'")),), -2 - st.index))
            if edge_names is None and ADD_IN_PLACE:
                self.owned.add(name)  # a sum is a new array
        else:
            grad_written.add(src)
            self.lines.append(Line(f"{name} = {expr}", {read}, {name}, ((name, held),)))
            # Only the part of a vjp whose results are new arrays, one per input, is the plan's
            # alone; anything else may be another cotangent's array (Add hands g on), and a
            # recorded run keeps each wire's part.
            if edge_names is None and ADD_IN_PLACE and getattr(st.spec.vjp, "fresh_result", False):
                self.owned.add(name)
            else:
                self.owned.discard(name)

    def gradients_block(self, st: Step) -> None:
        """TF's tf.gradients as a block: reverse mode, inline, over what precedes it on the page."""
        program, lines = self.program, self.lines
        ys, xs = st.inputs[0], st.inputs[1]
        seeds_in = st.inputs[2] if len(st.inputs) > 2 and st.inputs[2] else ()
        paths = GradientPaths(program, tuple(ys), None, frozenset(xs), upto=st.index)
        if paths.prevented:
            self.prevented_by_gradients = (st.node, paths.prevented)
        gp = f"h{st.index}_"
        seeded = set()
        for i, y in enumerate(ys):
            made = new(y, f"the gradient seed of 'ys[{i}]'")
            if i < len(seeds_in):
                seed, reads = self.arg(seeds_in[i])
                held = alias(seed) if reads else RESIDENT
            else:
                seed, reads, held = f"_ones(s{y})", {f"s{y}"}, made
            name = f"{gp}{y}"
            if y in seeded:
                lines.append(Line(f"_n = {st.index}; {name} = {name} + {seed}", reads | {name}, {name},
                                  ((name, made),), st.index))
            else:
                lines.append(Line(f"_n = {st.index}; {name} = {seed}", reads, {name}, ((name, held),), st.index))
                seeded.add(y)
        bwd = [s for s in reversed(program.steps[:st.index])
               if s.spec.gradient == "vjp" and any(paths.needs.get((s.index, j)) for j in range(len(s.in_edges)))]
        written = self.backward(paths, bwd, seeded, gp, None)
        if len(ys) == 1 and not seeds_in:
            self.shares.append((st.index, ys[0], gp, paths, frozenset(written)))
        slots = program.slots
        for x, o in zip(xs, st.outputs):
            if x in written:
                lines.append(Line(f"s{o} = {gp}{x}", {f"{gp}{x}"}, {f"s{o}"}, ((f"s{o}", alias(f"{gp}{x}")),)))
            else:  # x does not reach the ys (or only through a StopGradient): its gradient is zero
                a, reads = self.arg(x)
                lines.append(Line(f"_n = {st.index}; s{o} = _zeros({a})", reads, {f"s{o}"},
                                  ((f"s{o}", new(o, f"output '{slots[o].port}'")),), st.index))

    # ---------------------------------------------------------------------------- compile

    def compile(self, value_slots, grad_slots, edge_names, update_names, record):
        """(the function, its source, the lines of its body, {source line: step cursor})."""
        returned = ({f"s{s}" for s in value_slots} | {f"g{s}" for s in grad_slots} | {n for n, _ in edge_names}
                    | {n for n, _ in update_names})
        ret = ("return (" + "".join(f"s{s}, " for s in value_slots) + "), ("
               + "".join(f"g{s}, " for s in grad_slots) + "), ("
               + "".join(f"{n}, " for n, _ in edge_names) + "), ("
               + "".join(f"{n}, " for n, _ in update_names) + ")")
        body = self.lines if record else _with_frees(self.lines, returned)
        # _n is the step running (the cursor): the failure handler names its block; the run's
        # allocation guard finds it from the line a block was called from (see memplan.RunGuard).
        head = ["def _run(V, F, G0, D, _G, B):", "    _n = -1", "    try:"]
        src = head + [f"        {line.code}" for line in body]
        src += [f"        {ret}", "    except Exception as _e:", "        _fail(_n, _e, locals())"]
        source = "\n".join(src)
        exec(compile(source, f"<blockflow plan {self.program.page_name}>", "exec"), self.ns)
        at_line = {len(head) + 1 + k: line.at for k, line in enumerate(body) if line.at is not None}
        return self.ns["_run"], source, body, at_line


_HUGE = 2 << 20


class KeptArrays(list):
    """The arrays a plan keeps for its runs to write into (a plain list of Nones keeps none)."""


def _keep(a, into):
    """An array like ``a`` for later runs to write into when ``into`` keeps arrays (else None),
    in memory of its own (an anonymous map):
    kept arrays taken from malloc's heap would change where every other array of the process
    falls, and which of them glibc gives back to the kernel and faults in again. Aligned to 2 MB
    and advised as huge pages where the system has them, as numpy does for its large arrays
    (with 4 kB pages the same softmax ran 1.2-1.5x slower: TLB misses)."""
    if type(into) is not KeptArrays or type(a) is not np.ndarray:
        return None
    m = mmap.mmap(-1, a.nbytes + _HUGE)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            m.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    start = np.frombuffer(m, np.uint8, count=1).ctypes.data
    offset = -start % _HUGE
    return np.frombuffer(m, dtype=a.dtype, count=a.size, offset=offset).reshape(a.shape)


def _iadd(a, b):
    """``a + b``, into ``a``'s array when that gives the same array (same shape and dtype)."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape and a.dtype == b.dtype \
            and a.flags.writeable:
        return np.add(a, b, out=a)
    return a + b


def _bound_ufunc(st: Step) -> bool:
    """Whether the plan calls this step's ufunc itself (see _Writer._bind_forward)."""
    return (BIND_UFUNCS and getattr(st.spec.forward, "ufunc", None) is not None and not st.attrs
            and not st.spec.forward_context and not st.refs)


def _reusable_slots(program: Program, fwd, returned: set) -> set:
    """The slots whose arrays a plan can keep and overwrite in the next run.

    A value qualifies when its step's forward is a bound ufunc (it can write into ``out=``), its
    shape is fixed and large, the run does not return it, and no block can hand it on: every
    block reading it (forward, and its vjp) is a bound ufunc or a block whose forward says
    ``fresh_result`` (Sum, Mean), whose results and gradients are new arrays (or the cotangent),
    never a view of an input. So no array the caller gets back, now or later, is a kept buffer.
    """
    slots = program.slots
    readers: dict[int, list] = {}
    for st in program.steps:
        for j in range(len(st.in_edges)):
            readers.setdefault(st.flat_input(j), []).append(st)
    out, total = set(), 0
    for st in fwd:
        if not _bound_ufunc(st) or len(st.outputs) != 1:
            continue
        o = st.outputs[0]
        t = slots[o].type
        if o in returned or slots[o].state or None in t.shape or math.prod(t.shape) < REUSE_MIN_SIZE:
            continue
        if not all(_bound_ufunc(r) or getattr(r.spec.forward, "fresh_result", False) for r in readers.get(o, ())):
            continue
        total += _nbytes(t)
        if total > REUSE_MAX_BYTES:
            break
        out.add(o)
    return out


def _needs_by_input(st: Step, needs_flat) -> tuple:
    """Per declared input, whether it needs a cotangent (a tuple of them for an InputList)."""
    needs = []
    j = 0
    for src in st.inputs:
        if isinstance(src, tuple):
            needs.append(tuple(needs_flat[j:j + len(src)]))
            j += len(src)
        elif src is None:
            needs.append(False)
        else:
            needs.append(needs_flat[j])
            j += 1
    return tuple(needs)


def _struct_expr(st: Step, prefix: str, present, assign: bool = False) -> str:
    """Code for a step's outputs shaped as the block returns them: an OutputList is a list."""
    parts = []
    for entry in st.out_struct:
        if isinstance(entry, tuple):
            items = [f"{prefix}{o}" if present(o) else "None" for o in entry]
            parts.append(("(" if assign else "[") + ", ".join(items) + ("," if len(items) == 1 else "")
                         + (")" if assign else "]"))
        else:
            parts.append(f"{prefix}{entry}" if present(entry) else "None")
    if len(parts) == 1:
        return parts[0]
    return "(" + ", ".join(parts) + ")"


def _with_frees(lines, returned):
    """Insert ``del`` statements after the last use of every local that is not returned."""
    last: dict[str, int] = {}
    for i, line in enumerate(lines):
        reads, writes = line.reads, line.writes
        for name in writes:
            last[name] = max(last.get(name, i), i)
        for name in reads:
            last[name] = i
    frees: dict[int, list[str]] = {}
    for name, i in last.items():
        if name not in returned:
            frees.setdefault(i, []).append(name)
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i in frees:
            names = tuple(sorted(frees[i]))
            out.append(Line("del " + ", ".join(names), set(), set(), frees=names))
    return out


def _nbytes(t: TensorType) -> int:
    """Bytes of a tensor of type ``t`` (0 while a size is unknown)."""
    shape = t.shape
    return 0 if None in shape else math.prod(shape) * t.dtype.itemsize


def parts_of_updates(st: Step, slots) -> tuple:
    """What a state-updating block's updates hold: a new value per ref input (the Variable's, its
    slots'), counted as new arrays even where a block returns its output again."""
    items = []
    for pos, decl in enumerate(st.spec.inputs):
        if decl.ref and st.inputs[pos] is not None:
            items.append((decl.name, st.inputs[pos], f"the new value of '{decl.name}'"))
    return memparts(items)
