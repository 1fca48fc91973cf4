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
from dataclasses import dataclass
from functools import partial

import numpy as np

from blockflow.compile.gradpaths import GradientPaths
from blockflow.compile.program import Program, Step
from blockflow.project import Edge
from blockflow.run.certify import certificates
from blockflow.run.code_parts import (checked_seed, needs_by_input, nbytes, parts_of_updates, seed_fits, struct_expr,
                                      with_frees)
from blockflow.run.fold import finish_known, folded_call, known_part, known_seed
from blockflow.run.inline_grads import inline_vjp
from blockflow.run.kept import KeptArrays, add_into, keep_array
from blockflow.run.memplan import RESIDENT, Line, MemoryPlan, alias, new, parts_into, value_dependent
from blockflow.run.memplan import parts as memparts
from blockflow.run.overwrite import bound_ufunc, in_place_slots, product_sums, reusable_slots
from blockflow.run.shared_grads import shared_cotangents

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
#: call a vjp's ``into_g`` variant when the run alone holds its cotangent: the gradient is
#: written into the cotangent's array (off: the plain vjp, new arrays)
VJP_INTO_G = True
#: write an elementwise step's result into an input's array when nothing reads that input again
#: (overwrite.in_place_slots; off: a new array)
FORWARD_IN_PLACE = True
#: compute a sum over every value of a product that nothing else reads from its factors, a
#: piece at a time (overwrite.product_sums; off: the product written out, then summed)
SUM_OF_PRODUCTS = True
#: seed a gradient with a copy of a ones array bound once (off: np.ones_like of the target)
BOUND_SEED = True
#: move random blocks' streams to the run's stretch at the plan's top, while the interpreter's
#: objects are still in the caches (off: at each block's line; the same numbers). An RBM step:
#: 2-12 us less, within two identical copies' spread (benchmarks/README.md, "Eighteenth session")
HOIST_STREAMS = True
#: the smallest value (in elements) written in place: below it numpy's call costs more than the
#: memory saved
IN_PLACE_MIN_SIZE = 1 << 12
#: the largest seed bound as a ones array (a copy of a larger one costs what np.ones_like does)
_SEED_MAX_SIZE = 1 << 12
#: small elementwise gradients written inline from ``vjp.inline`` templates (run/inline_grads.py)
INLINE_VJPS = True
#: let the run's backward take a Gradients block's cotangents, scaled, where they are its own
#: (see _Writer.shared_cotangents; off: the backward computes them again)
SHARE_GRADIENTS = True
#: let a checked run skip reading a Variable's gradient made by one large matrix product, when
#: its operands certify it finite (run/certify.py; off: every returned gradient is read)
CERTIFY_PRODUCTS = True
#: a vjp that reads no value, given constant cotangents (a loss's reductions), is computed once
#: when the plan is written (run/fold.py)
FOLD_COTANGENTS = True
#: a certificate's own cost, in elements read: its call and two dots cost what reading 32k more
#: values does (8 us for 66k operands against 16 to read the 200k-value gradient they vouch
#: for; a 65k gradient from 32k of operands was no cheaper certified: 6.0 against 5.4 us)
CERTIFY_OVERHEAD = 1 << 15
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
          feed_steps, state_slots, fail, rng, where, check=False, seeded=False) -> Lowered:
    """Generate and compile the function for one kind of run.

    ``fwd``/``bwd``: the steps to run forward, and backward (in reverse order); ``paths``: the
    GradientPaths of ``target`` (a slot, or None for a forward pass); ``record``: return every
    value and each wire's gradient, else only ``fetch``, the target and the ``wanted_grads``
    ((node, slot) pairs); ``var_steps``/``feed_steps``/``state_slots``: the order of V and F;
    ``fail(n, exc, locals)``, ``rng(index, data)`` and ``where(at)`` are the plan's failure
    handler, random streams and cursor names. ``check``: the runs will check their results for
    NaN/Inf (certificates may stand for reading some gradients: ``certified``). ``seeded``: the
    runs give their own gradient seed (G0), so the backward pass starts from no constant.
    """
    w = _Writer(program, fail, rng)
    returned = set(fetch) | ({target} if target is not None else set())
    if not record:
        if SUM_OF_PRODUCTS:
            w.fused = product_sums(program, fwd, returned, bind=BIND_UFUNCS, min_size=IN_PLACE_MIN_SIZE)
        fused = list(w.fused.values())
        if FORWARD_IN_PLACE:
            w.in_place = in_place_slots(program, fwd, returned, bind=BIND_UFUNCS, min_size=IN_PLACE_MIN_SIZE,
                                        fused=fused)
        if REUSE_BUFFERS:
            w.reusable = reusable_slots(program, fwd, returned, w.in_place, bind=BIND_UFUNCS, min_size=REUSE_MIN_SIZE,
                                        max_bytes=REUSE_MAX_BYTES, nbytes=nbytes, fused=fused)
        # the gradients the caller gets are never written into
        w.protected = {f"g{s}" for _, s in wanted_grads}
    update_names = w.forward(fwd, var_steps, feed_steps, state_slots)
    edge_names: list[tuple[str, Edge]] = []
    grad_written: set[int] = set()
    if target is not None:
        t = target
        w.lines.append(Line(f"_n = -1; g{t} = G0 if G0 is not None else {w.ones(t)}", {f"s{t}"}, {f"g{t}"},
                            ((f"g{t}", new(t, "the gradient seed")),), -1))
        if FOLD_COTANGENTS and not record and not seeded:
            known_seed(w, t)
        if SHARE_GRADIENTS and not record and w.shares:
            w.shared = w.shared_cotangents(paths, bwd, t)
            w.protected |= {f"g{y}" for y, _ in w.shared.values()}  # read again to scale the shares
        w.wanted = {s for _, s in wanted_grads}
        grad_written = w.backward(paths, bwd, {t}, "g", edge_names if record else None)
        finish_known(w, t, {s for _, s in wanted_grads})
    if record:
        value_slots = [o for st in fwd for o in st.outputs]
        grad_slots = sorted(grad_written)
    else:
        value_slots = sorted(set(fetch) | ({target} if target is not None else set()))
        grad_slots = [s for _, s in wanted_grads]
    certified = certificates(w, grad_slots, CERTIFY_OVERHEAD) if check and CERTIFY_PRODUCTS and not record else {}
    fn, source, body, at_line = w.compile(value_slots, grad_slots, edge_names, update_names, record, certified)
    slots = program.slots
    key = lambda i: (slots[i].node, slots[i].port)  # noqa: E731
    memory = MemoryPlan(program, body, _fixed_inputs(program, var_steps, state_slots, w.ns),
                        [(st.outputs[0], f"the feed of {program.full_name(st.node)}") for st in feed_steps],
                        where, fn.__code__, at_line)
    return Lowered(fn, len(w.buffers), [nbytes(slots[o].type) for o in w.buffers], source, memory,
                   value_slots, grad_slots, [key(i) for i in value_slots],
                   [key(i) for i in grad_slots], [(node, key(i)) for node, i in wanted_grads],
                   None if target is None else key(target), [e for _, e in edge_names],
                   [st for _, st in update_names], w.prevented_by_gradients)


def _fixed_inputs(program, var_steps, state_slots, ns):
    """What every run of this kind is handed, as (label, bytes): Variables, slot state, constants."""
    slots = program.slots
    fixed = [(f"the Variable {program.full_name(st.node)} {slots[st.outputs[0]].type}",
              nbytes(slots[st.outputs[0]].type)) for st in var_steps]
    fixed += [(f"the state {program.full_name(slots[s].node)}.{slots[s].port} {slots[s].type}",
               nbytes(slots[s].type)) for s in state_slots]
    fixed.append(("the constants", sum(getattr(v, "nbytes", 0) for k, v in ns.items()
                                       if k[0] in "ck" and k[1:2].isdigit())))
    return fixed


class _Writer:
    """The lines of one generated function and the namespace they run in."""

    def __init__(self, program: Program, fail, rng):
        self.program = program
        self.slots = program.slots
        self.ns: dict = {"_fail": fail, "_ones": np.ones_like, "_zeros": np.zeros_like, "_R": rng,
                         "_FILES": program.files, "_iadd": add_into, "_keep": keep_array, "_seed_fits": seed_fits}
        self.lines: list[Line] = []  # code, names read and written, what they hold, the step cursor
        self.prevented_by_gradients = None
        #: slots whose arrays are kept across runs (overwrite.reusable_slots), and the buffer index of each
        self.reusable: set = set()
        self.buffers: dict[int, int] = {}
        #: cotangent names holding an array no other name or caller can see (see _accumulate)
        self.owned: set = set()
        #: cotangent names read after their step's vjp (the gradients the run returns, those
        #: that scale a Gradients block's: shared)
        self.protected: set = set()
        #: {output slot: input slot whose array it is written into} (overwrite.in_place_slots)
        self.in_place: dict = {}
        #: {Sum step index: the Multiply step whose product it sums} (overwrite.product_sums)
        self.fused: dict = {}
        self._unmade = None
        #: what each Gradients block differentiated: (step index, its ys slot, its cotangents'
        #: prefix, its GradientPaths, the slots it wrote a cotangent for)
        self.shares: list = []
        #: {slot: (ys slot, prefix)} whose cotangent in the run's backward is the Gradients
        #: block's scaled (shared_cotangents); the slots whose gradients the run returns
        self.shared: dict = {}
        self.wanted: set = set()
        #: {slot: (step, flat input, index of its vjp's line)} for cotangents that are one vjp's
        #: part, never summed (certificates)
        self.sole: dict = {}
        #: {slot: its cotangent's value} where the plan knows it (run/fold.py), the cotangent
        #: names that may hold one of those values (handed on by a vjp), the bytes they hold
        self.known, self.maybe_known, self.folded_bytes = {}, set(), 0
        #: the lines moving random blocks' streams to this run's stretch, written first (HOIST_STREAMS)
        self.streams: list[Line] = []

    def ones(self, slot) -> str:
        """Code for a gradient seed of ones shaped like ``slot``'s value: a copy of a ones array
        bound once when its type is fully known (np.ones_like of a numpy scalar costs ~5 us)."""
        t = self.slots[slot].type
        if not BOUND_SEED or None in t.shape or math.prod(t.shape) > _SEED_MAX_SIZE:
            return f"_ones(s{slot})"
        name = f"o{slot}"
        self.ns[name] = np.ones(t.shape, t.dtype)
        return f"{name}.copy()"

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
            elif st.role == "placeholder":   # the feed, of the Placeholder's dtype and shape already
                lines.append(Line(f"{outs[0]} = F[{feed_index[st.index]}]", set(), set(outs),
                                  ((outs[0], RESIDENT),), st.index))
            elif st.index in self.unmade:
                # a product only a sum reads, made there from its factors: its name holds the first
                # factor, whose shape and dtype it has (no vjp reads its value: overwrite.product_sums)
                a, reads = self.arg(st.flat_input(0))
                lines.append(Line(f"{outs[0]} = {a}", reads, set(outs), ((outs[0], alias(a) if reads else RESIDENT),)))
            else:
                self._block_call(st, update_names)
        lines[:0] = self.streams   # the random streams moved first (HOIST_STREAMS)
        return update_names

    @property
    def unmade(self) -> set:
        """The indices of the Multiply steps whose product is never written out."""
        if self._unmade is None:
            self._unmade = {m.index for m in self.fused.values()}
        return self._unmade

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
        # A block whose forward, for some attrs, is one numpy function of its inputs (MatMul
        # without transposes: np.matmul) says which through ``forward.direct(attrs)``.
        direct = getattr(fn, "direct", None)
        if BIND_UFUNCS and direct is not None and not st.spec.forward_context:
            called = direct(st.attrs)
            if called is not None:
                self.ns[fname] = called
                return fname, []
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

    def _stream(self, st: Step) -> str:
        """A random block's generator for its forward (HOIST_STREAMS: moved first, on its line)."""
        if not HOIST_STREAMS:
            return f"_R({st.index}, D)"
        name = f"r{st.index}"
        self.streams.append(Line(f"_n = {st.index}; {name} = _R({st.index}, D)", set(), {name}, (), st.index))
        return name

    def _block_call(self, st: Step, update_names) -> None:
        """One block's forward call, and for a value-dependent block the report of what it made."""
        slots = self.slots
        fname, kw = self._bind_forward(st)
        outs = [f"s{o}" for o in st.outputs]
        parts, reads = self.call_args(st)
        m = self.fused.get(st.index)
        if m is not None:  # the sum of a product from its factors
            fname = f"f{st.index}p"
            self.ns[fname] = st.spec.forward.of_product
            factors, reads = self.call_args(m)
            parts = factors + parts[1:]
        parts += kw
        if "rng" in st.spec.forward_context:
            rng = self._stream(st)
            parts.append(f"rng={rng}")
            if rng.isidentifier():
                reads = reads | {rng}
        if "data" in st.spec.forward_context:
            parts.append("data=D")
        if "files" in st.spec.forward_context:
            parts.append("files=_FILES")
        target = struct_expr(st, "s", lambda o: True, assign=True) if outs else "_"
        keep = ""
        binds = [(f"s{o}", new(o, f"output '{slots[o].port}'")) for o in st.outputs]
        if len(st.outputs) == 1 and st.outputs[0] in self.in_place:
            # nothing reads the input's value again: the result goes into its array
            src = f"s{self.in_place[st.outputs[0]]}"
            if not bound_ufunc(st, BIND_UFUNCS):  # a block's own variant taking out= (writes_out)
                self.ns[fname] = st.spec.forward.with_out
            parts.append(f"out={src}")
            binds = [(outs[0], alias(src))]
        elif len(st.outputs) == 1 and st.outputs[0] in self.reusable:
            # the first run makes the array (with numpy's own dtype and shape), later runs write into it
            k = self.buffers.setdefault(st.outputs[0], len(self.buffers))
            parts.append(f"out=B[{k}]")
            keep = f"; B[{k}] = B[{k}] if B[{k}] is not None else _keep({target}, B)"
        writes = set(outs)
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
            folded = folded_call(self, st, needs_flat, grad_written) if gp == "g" and edge_names is None else None
            r = folded[0] if folded else self._vjp_call(st, gp, grad_written, needs_flat)
            # a vjp given one of the plan's arrays may hand it on (Add's): its parts may be it
            hands_on = gp == "g" and not folded and not getattr(st.spec.vjp, "fresh_result", False) and any(
                f"g{o}" in self.maybe_known for o in st.outputs)
            for j, (pos, idx, edge) in enumerate(st.in_edges):
                if needs_flat[j]:
                    self._accumulate(st, j, r, gp, grad_written, edge_names, folded and folded[1], hands_on)
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
        """The slots whose cotangent in the run's backward is a Gradients block's times one
        number (shared_grads.shared_cotangents)."""
        return shared_cotangents(self.program, self.shares, paths, bwd, target)

    def _vjp_call(self, st: Step, gp, grad_written, needs_flat) -> str:
        """The line calling a block's vjp, or computing its result inline (INLINE_VJPS); returns
        the name of its result (one part per input)."""
        spec = st.spec
        inline = inline_vjp(self, st, gp, needs_flat, IN_PLACE_MIN_SIZE) if INLINE_VJPS else None
        if inline is not None:
            return self._vjp_line(st, gp, needs_flat, inline[0], inline[1], None)
        reads = {f"{gp}{o}" for o in st.outputs if o in grad_written} | {f"s{o}" for o in st.outputs}
        gexpr = struct_expr(st, gp, grad_written.__contains__)
        oexpr = struct_expr(st, "s", lambda o: True)
        parts, r2 = self.call_args(st)
        if "rng" in spec.vjp_context:
            parts.append(f"rng=_R({st.index}, D)")
        reads |= r2
        kw = dict(st.attrs)
        if "needs" in spec.vjp_context:
            kw["needs"] = needs_by_input(st, needs_flat)
        bname = f"b{st.index}_{len(self.ns)}"
        into_g = self._into_g(st, gp)
        self.ns[bname], kwparts = self._keywords(spec.vjp if into_g is None else spec.vjp.into_g, kw, bname)
        parts += kwparts
        return self._vjp_line(st, gp, needs_flat, f"{bname}({gexpr}, {oexpr}, {', '.join(parts)})", reads, into_g)

    def _vjp_line(self, st: Step, gp, needs_flat, expr: str, reads, into_g) -> str:
        """The line binding a vjp's result, ``expr``, to its name, with what its parts hold."""
        r = f"{gp}r{st.index}"
        at = -2 - st.index
        made = []
        for j, (pos, idx, _) in enumerate(st.in_edges):
            if needs_flat[j]:
                decl = st.spec.inputs[pos]
                port = decl.port(idx) if idx is not None else decl.name
                made.append(((pos, idx), st.flat_input(j), f"the gradient of input '{port}'"))
        held = memparts(made) if into_g is None else parts_into(made, into_g, st.outputs[0])
        self.lines.append(Line(f"_n = {at}; {r} = {expr}", reads, {r}, ((r, held),), at))
        self.vjp_line = len(self.lines) - 1
        return r

    def _into_g(self, st: Step, gp) -> str | None:
        """The cotangent name whose array a step's vjp may write its gradient into (its
        ``into_g`` variant), or None: the step has one output, of a fixed large shape, whose
        cotangent the plan alone holds (``owned``) and nobody reads after this vjp (a cotangent
        is read by its step's vjp only, unless the run returns it or scales shared cotangents
        by it: ``protected``)."""
        # Not inside a Gradients block: the run's backward may read its cotangents later, scaled
        # (shared_cotangents, decided after the block's backward is written).
        if not VJP_INTO_G or gp != "g" or len(st.outputs) != 1 or getattr(st.spec.vjp, "into_g", None) is None:
            return None
        o = st.outputs[0]
        name, t = f"{gp}{o}", self.slots[o].type
        if name not in self.owned or name in self.protected or None in t.shape \
                or math.prod(t.shape) < IN_PLACE_MIN_SIZE:
            return None
        self.owned.discard(name)  # its array is the vjp's now
        return name

    def _accumulate(self, st: Step, j: int, r: str, gp, grad_written, edge_names, folded=None,
                    hands_on=False) -> None:
        """Add the vjp's part for flat input ``j`` to its source slot's cotangent (kept under a
        wire's own name first when ``edge_names`` records wires). ``folded``: the vjp's result,
        computed when the plan was written; ``hands_on``: its parts may be a known cotangent."""
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
            add = (f"_iadd({name}, {expr})" if name in self.owned and nbytes(slot.type) >= REUSE_MIN_SIZE * 4
                   else f"{name} + {expr}")
            self.lines.append(Line(f"{name} = {add}", {name, read}, {name},
                                   ((name, new(src, f"the gradient summed over the wires of "
                                                    f"'{slot.node}:{slot.port}'")),), -2 - st.index))
            if edge_names is None and ADD_IN_PLACE:
                self.owned.add(name)  # a sum is a new array
            self.sole.pop(src, None)
            self.known.pop(src, None)
            self.maybe_known.discard(name)
        else:
            grad_written.add(src)
            if gp == "g" and edge_names is None:
                self.sole[src] = (st, j, self.vjp_line)
            self.lines.append(Line(f"{name} = {expr}", {read}, {name}, ((name, held),)))
            # Only the part of a vjp whose results are new arrays, one per input, is the plan's
            # alone; anything else may be another cotangent's array (Add hands g on), and a
            # recorded run keeps each wire's part.
            if folded is not None:
                known_part(self, src, folded[pos] if idx is None else folded[pos][idx])
            elif edge_names is None and ADD_IN_PLACE and getattr(st.spec.vjp, "fresh_result", False):
                self.owned.add(name)
            else:
                self.owned.discard(name)
            if hands_on:
                self.maybe_known.add(name)

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
                seed, reads = checked_seed(self.slots, seeds_in[i], seed, reads, y, i)
            else:
                seed, reads, held = self.ones(y), {f"s{y}"}, made
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

    def compile(self, value_slots, grad_slots, edge_names, update_names, record, certified=None):
        """(the function, its source, the lines of its body, {source line: step cursor})."""
        certified = certified or {}
        returned = ({f"s{s}" for s in value_slots} | {f"g{s}" for s in grad_slots} | {n for n, _ in edge_names}
                    | {n for n, _ in update_names} | set(certified.values()))
        ret = ("return (" + "".join(f"s{s}, " for s in value_slots) + "), ("
               + "".join(f"g{s}, " for s in grad_slots) + "), ("
               + "".join(f"{n}, " for n, _ in edge_names) + "), ("
               + "".join(f"{n}, " for n, _ in update_names) + "), ("
               + "".join(f"{certified.get(s, 'False')}, " for s in grad_slots) + ")")
        body = self.lines if record else with_frees(self.lines, returned)
        # _n is the step running (the cursor): the failure handler names its block; the run's
        # allocation guard finds it from the line a block was called from (see memplan.RunGuard).
        head = ["def _run(V, F, G0, D, _G, B):", "    _n = -1", "    try:"]
        src = head + [f"        {line.code}" for line in body]
        src += [f"        {ret}", "    except Exception as _e:", "        _fail(_n, _e, locals())"]
        source = "\n".join(src)
        exec(compile(source, f"<blockflow plan {self.program.page_name}>", "exec"), self.ns)
        at_line = {len(head) + 1 + k: line.at for k, line in enumerate(body) if line.at is not None}
        return self.ns["_run"], source, body, at_line
