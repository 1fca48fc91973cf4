"""A compiled page as an ONNX model for inference (docs/export.md, section ONNX).

The page is compiled (flattened) first: composites become their blocks, with ids like
``d1/MatMul``, so the graph holds exactly what blockflow runs (ONNX local functions are not
used: a flat graph is what every runtime optimises best, and the names keep the hierarchy).
Only the blocks the outputs depend on are written; blocks that change state (Apply*, Assign)
and Gradients are training, not inference, and are left out unless an output needs them (then
they are refused). Each block becomes one node or a few (onnx_ops_*.py), named after its id.

- Variables are initializers holding the values blockflow starts from
  (``program.variable_values``); constants too.
- Placeholders, and the outputs of dataset blocks, are the graph's inputs, with their dtypes
  and shapes; a size the page leaves open is a symbolic dimension ``<input>_dim<axis>``.
- The graph's outputs are the outputs asked for (``node`` or ``node:port``, each named after
  that text), default the page's loss; a model meant for inference names its prediction (the
  logits, the probabilities) instead, since the loss needs the labels as an input too.
- The inference phase: LearningPhase is false, and a Select on it reads only its inference
  branch, so a Dropout layer passes its input through and batch normalization uses its moving
  statistics (as ``run(split="test")`` in blockflow). Unread values are pruned.

``graph.metadata_props`` maps each graph input and output name back to the project's node
(``input:<name>`` -> node id, ``output:<name>`` -> ``node:port``).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from blockflow.budget import format_size
from blockflow.compile.compiler import compile_project
from blockflow.compile.program import Program, Step
from blockflow.optional import need
from blockflow.export.names import Names, Scopes, comment_text, identifier
from blockflow.export.onnx_lowering import OnnxCall, Unsupported, onnx_dtype, onnx_lowering_table
from blockflow.export.errors import ExportError
from blockflow.export.lowering import call_fields, check_compiled, refuse_unlowered
from blockflow.export.torch_module import output_slots
from blockflow.project import Project, port_text
from blockflow.registry import Registry
from blockflow.spec import TensorType

__all__ = ["export_onnx", "onnx_refused_blocks", "write_onnx_file", "MIN_OPSET"]

#: the lowest opset the lowerings are written for (ReduceSum's axes input, Split's sizes input)
MIN_OPSET = 17

#: the most values one ONNX file holds: protobuf writes no message past 2 GiB (a larger model keeps
#: its weights in external data files, which the export does not write)
MAX_VALUE_BYTES = 2 ** 31 - 1


def inference_phase(program: Program) -> dict:
    """{slot: bool} of the values an inference run knows before it starts: LearningPhase is
    false, and what Identity or LogicalNot make of that."""
    known: dict = {}
    for st in program.steps:
        if st.spec.name == "LearningPhase":
            known[st.outputs[0]] = False
        elif st.spec.name in ("Identity", "LogicalNot", "Output", "Input") and st.inputs and st.inputs[0] in known:
            value = known[st.inputs[0]]
            known[st.outputs[0]] = (not value) if st.spec.name == "LogicalNot" else value
    return known


def chosen_branch(program: Program, st: Step, known: dict):
    """The slot a Select whose condition is known (the learning phase) passes on unchanged, or
    None: in inference a layer's training branch (Dropout's mask, the batch's statistics) is
    never computed. Only where the chosen branch has the output's shape (nothing broadcast)."""
    if st.spec.name != "Select" or st.inputs[0] not in known:
        return None
    chosen = st.inputs[1] if known[st.inputs[0]] else st.inputs[2]
    if program.slot(chosen).type.shape != program.slot(st.outputs[0]).type.shape:
        return None
    return chosen


def onnx_needed_nodes(program: Program, out_slots) -> set:
    """The flat nodes the outputs depend on in inference (and nothing else: inference changes
    no state, and a Select on the learning phase reads only the inference branch)."""
    known = inference_phase(program)
    todo = [program.slot(s).node for s in out_slots]
    needed: set = set()
    while todo:
        node = todo.pop()
        if node in needed:
            continue
        needed.add(node)
        st = program.step(node)
        if st is None:
            continue
        branch = chosen_branch(program, st, known)
        sources = [branch] if branch is not None else [
            x for src in st.inputs for x in (src if isinstance(src, tuple) else (src,)) if x is not None]
        for slot in sources:
            producer = program.slot(slot).node
            if producer != node and program.step(producer) is not None:
                todo.append(producer)
    return needed


def _passes(st: Step) -> bool:
    """Steps that need no lowering: values the graph holds as initializers or inputs."""
    return (st.role in ("variable", "placeholder") or st.spec.is_dataset
            or st.spec.name in ("Input", "Output"))


def _folded(program: Program, st: Step) -> bool:
    """A block whose every output the compiler already knows (a constant, a shape): its values
    are initializers, whatever the block."""
    return bool(st.outputs) and not st.refs and all(program.slot(o).type.value is not None for o in st.outputs)


def onnx_refused_blocks(program: Program, needed: set | None = None) -> dict:
    """{block name: [flat node ids]} of the page's blocks (those in ``needed``, default all)
    with no ONNX lowering."""
    table = onnx_lowering_table()
    out: dict = {}
    for st in program.steps:
        if (needed is not None and st.node not in needed) or _passes(st) or _folded(program, st):
            continue
        if st.role == "gradients" or st.spec.name not in table:
            out.setdefault(st.spec.name, []).append(st.node)
    return out


def export_onnx(project: Project, page: str | None = None, outputs=None, program: Program | None = None,
                opset: int = MIN_OPSET, registry: Registry | None = None):
    """The ONNX model (an ``onnx.ModelProto``) of ``page`` (default: the first) computing
    ``outputs`` (``node`` or ``node:port`` texts; default the loss). ExportError when the page
    does not compile, or has blocks (or uses of them) with no ONNX lowering: every one is listed.
    The model passes ``onnx.checker.check_model(model, full_check=True)``."""
    onnx = need("onnx")
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= int(opset) <= newest:
        raise ExportError(f"opset {opset} is not supported: give one from {MIN_OPSET} to {newest}")
    program = program or compile_project(project, page, registry)
    check_compiled(program)
    out_slots = output_slots(program, outputs)
    refuse_unlowered(program, onnx_refused_blocks(program, onnx_needed_nodes(program, out_slots)),
                     "ONNX counterpart")
    if outputs:
        labels = [str(t) for t in outputs]
    else:    # the loss as the page names it ("loss", not the flat "loss/loss_out:output")
        page_loss = project.page(program.page_name).loss if program.loss is not None else None
        labels = [str(page_loss)] if page_loss and len(out_slots) == 1 else None
    builder = _GraphBuilder(onnx, program, out_slots, int(opset), labels)
    model = builder.build()
    onnx.checker.check_model(model, full_check=True)   # a lowering that writes a bad graph fails here
    return model


def write_onnx_file(model, path) -> list[Path]:
    """Write ``model`` to ``path`` (through a temporary renamed over it, as every export file);
    the paths written."""
    from blockflow.export.files import _replace

    data = model.SerializeToString()
    _replace(Path(path), lambda fh: fh.write(data))
    return [Path(path)]


class _GraphBuilder:
    """Walks the flat schedule once: inputs, initializers, one lowering per needed block."""

    def __init__(self, onnx, program: Program, out_slots: list, opset: int, labels=None):
        self.onnx = onnx
        self.program = program
        self.out_slots = out_slots
        self.opset = opset
        self.table = onnx_lowering_table()
        # values and nodes keep an instance's scope (d1/MatMul_1): near_their_readers; the graph's
        # inputs and outputs are plain identifiers, the names a caller feeds and reads
        scopes = Scopes()      # one identifier a scope, for nodes and values alike
        self.values = Names(make=scopes)
        self.node_names = Names(make=scopes)  # an instance's blocks keep its scope
        self.nodes: list = []
        self.initializers: list = []
        self.value_bytes = 0
        self.inputs: list = []
        self.metadata: dict[str, str] = {}
        self.expr: dict[int, str] = {}
        self.produced: set[str] = set()
        self.problems: list[str] = []
        self.needed = onnx_needed_nodes(program, out_slots)
        self.known = inference_phase(program)
        self.read = set(out_slots)
        for st in program.steps:
            if st.node in self.needed:
                branch = chosen_branch(program, st, self.known)
                for src in [branch] if branch is not None else st.inputs:
                    self.read.update(src if isinstance(src, tuple) else () if src is None else (src,))
        # the outputs' names are given first, so they read as the nodes they come from
        labels = labels or [self._port_label(s) for s in out_slots]
        self.out_names = [self.values(("out", i), identifier(text)) for i, text in enumerate(labels)]

    def _port_label(self, slot: int) -> str:
        s = self.program.slot(slot)
        ports = self.program.output_ports(s.node)
        return s.node if len(ports) <= 1 else f"{s.node}_{s.port}"

    # ------------------------------------------------------------------ what lowerings call

    def value_hint(self, call: OnnxCall) -> str:
        return call.node     # made a name (its scopes unique) by self.values

    def node(self, call: OnnxCall, op_type: str, inputs: list, outputs: int, hint: str, attrs: dict):
        suffix = f"_{hint}" if hint else ""
        outs = [self.values.fresh(call.node + suffix) for _ in range(outputs)]
        name = self.node_names.fresh(call.node + suffix)
        made = self.onnx.helper.make_node(op_type, ["" if i is None else i for i in inputs], outs,
                                          name=name, **{k: _plain(v) for k, v in attrs.items()})
        self.nodes.append(made)
        self.produced.update(outs)
        return outs[0] if outputs == 1 else outs

    def constant(self, value: np.ndarray, base: str) -> str:
        onnx_dtype(value.dtype)   # Unsupported for a dtype ONNX has not
        self._count(value)
        name = self.values.fresh(base)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.array(value, order="C"), name))
        return name

    # ---------------------------------------------------------------------------- the walk

    def build(self):
        for st in self.program.steps:
            if st.node in self.needed:
                self._step(st)
        if self.problems:
            raise ExportError(f"{len(self.problems)} block(s) on page '{self.program.page_name}' are used "
                              f"in a way ONNX cannot do exactly", self.problems)
        outputs = self._graph_outputs()
        self._prune({o.name for o in outputs})
        self.nodes = near_their_readers(self.nodes, {i.name for i in self.inputs})
        helper = self.onnx.helper
        graph = helper.make_graph(self.nodes, identifier(self.program.page_name, "page"), self.inputs,
                                  outputs, self.initializers,
                                  doc_string=f"page {comment_text(self.program.page_name, 60)}, exported by blockflow")
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, producer_name="blockflow", opset_imports=opsets)
        # the oldest IR version that opset needs: runtimes older than the installed onnx load it
        model.ir_version = helper.find_min_ir_version_for(opsets)
        helper.set_model_props(model, self.metadata)
        return model

    def _step(self, st: Step) -> None:
        program = self.program
        if st.role == "variable":
            value = np.asarray(program.variable_values[st.node], dtype=program.slot(st.outputs[0]).type.dtype)
            self.expr[st.outputs[0]] = self._initializer(value, st.node)
            return
        if st.role == "placeholder" or st.spec.is_dataset:
            for o in st.outputs:
                if o not in self.read:   # a dataset's labels, for a model of its predictions
                    continue
                self._graph_input(o, st.node if len(st.outputs) == 1 else f"{st.node}_{program.slot(o).port}")
            return
        if st.spec.name in ("Input", "Output"):
            self.expr[st.outputs[0]] = self._slot_expr(st.inputs[0])
            return
        branch = chosen_branch(program, st, self.known)
        if branch is not None:
            self.expr[st.outputs[0]] = self._slot_expr(branch)
            return
        if _folded(program, st):
            for o in st.outputs:
                s = program.slot(o)
                self.expr[o] = self._initializer(np.asarray(s.type.value, dtype=s.type.dtype),
                                                 st.node if len(st.outputs) == 1 else f"{st.node}_{s.port}")
            return
        call = self._call(st)
        try:
            result = _lower_widened(self.table[st.spec.name], call)
        except Unsupported as exc:
            self.problems.append(f"{program.full_name(st.node)} ({st.spec.name}): {exc}")
            result = [self.values.fresh("refused") for _ in st.outputs]   # lets the walk go on
        if isinstance(result, str):
            result = [result]
        if len(result) != len(st.outputs):
            raise ExportError(f"{program.full_name(st.node)}: its ONNX lowering gave {len(result)} "
                              f"outputs for {len(st.outputs)}")
        for o, name in zip(st.outputs, result):
            self.expr[o] = name

    def _call(self, st: Step) -> OnnxCall:
        return OnnxCall(**call_fields(self.program, st, self._slot_expr), builder=self)

    def _slot_expr(self, slot: int | None) -> str | None:
        if slot is None:
            return None
        found = self.expr.get(slot)
        if found is not None:
            return found
        s = self.program.slot(slot)
        if s.const:
            name = self.expr[slot] = self._initializer(np.asarray(s.type.value), f"{s.node}_{s.port}")
            return name
        raise ExportError(f"{self.program.full_name(s.node)} ({s.port}): a value the inference graph "
                          f"does not have (optimizer state?)")

    def _initializer(self, value: np.ndarray, text: str) -> str:
        try:
            onnx_dtype(value.dtype)
        except Unsupported as exc:
            raise ExportError(f"{text}: {exc}") from None
        self._count(value)
        name = self.values(object(), text)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.array(value, order="C"), name))
        return name

    def _count(self, value: np.ndarray) -> None:
        """Refuse, before it is copied, a value that takes the model past what one file holds:
        protobuf failed only when the graph was made, after copying every value twice (a 2.2 GB
        Variable: 29 s, 6 GB, then 'internal error: Failed to serialize proto')."""
        self.value_bytes += value.nbytes
        if self.value_bytes > MAX_VALUE_BYTES:
            raise ExportError(f"page '{self.program.page_name}': its values (Variables and constants) take more "
                              f"than {format_size(MAX_VALUE_BYTES + 1)}, the most one ONNX file holds (protobuf's "
                              f"limit; the export writes no external data files): export it to PyTorch instead")

    def _graph_input(self, slot: int, text: str) -> None:
        t = self.program.slot(slot).type
        name = self.values(("slot", slot), identifier(text))
        try:
            elem = onnx_dtype(t.dtype)
        except Unsupported as exc:
            raise ExportError(f"{text}: {exc}") from None
        shape = [d if d is not None else f"{name}_dim{i}" for i, d in enumerate(t.shape)]
        self.inputs.append(self.onnx.helper.make_tensor_value_info(name, elem, shape))
        self.metadata[f"input:{name}"] = self.program.slot(slot).node if text == self.program.slot(slot).node \
            else port_text(self.program.slot(slot).node, self.program.slot(slot).port)
        self.expr[slot] = name

    def _prune(self, used: set) -> None:
        """Drop the nodes and initializers no output reads (a block's outputs nobody asked for:
        SparseSoftmaxCrossEntropyWithLogits's backprop beside its loss)."""
        kept = []
        for n in reversed(self.nodes):
            if any(o in used for o in n.output):
                kept.append(n)
                used.update(i for i in n.input if i)
        self.nodes = kept[::-1]
        self.initializers = [t for t in self.initializers if t.name in used]

    def _graph_outputs(self) -> list:
        """The graph's outputs under the names given first: the node making a value is renamed
        to it where it can be (made by a node, asked once), else an Identity gives it."""
        helper = self.onnx.helper
        rename: dict[str, str] = {}
        asked = [self.expr[s] for s in self.out_slots]
        infos = []
        for slot, name, value in zip(self.out_slots, self.out_names, asked):
            if value in self.produced and asked.count(value) == 1 and value not in rename:
                rename[value] = name
            else:
                self.nodes.append(helper.make_node("Identity", [value], [name],
                                                   name=self.node_names.fresh(f"{name}_output")))
            t = self.program.slot(slot).type
            infos.append(helper.make_tensor_value_info(name, onnx_dtype(t.dtype), list(t.shape)))
            s = self.program.slot(slot)
            self.metadata[f"output:{name}"] = port_text(s.node, s.port)
        for n in self.nodes:
            for i, v in enumerate(n.input):
                if v in rename:
                    n.input[i] = rename[v]
            for i, v in enumerate(n.output):
                if v in rename:
                    n.output[i] = rename[v]
        return infos


def _plain(value):
    """An attribute value as the plain Python ONNX's helper takes (numpy scalars unwrapped)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


#: the 8- and 16-bit integers: ONNX's MatMul, CumSum, Reduce*, Relu... take none of them, and
#: ONNX Runtime's CPU kernels of Max, Min, Where, Pad, ArgMax... no int16
_NARROW = {np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.uint8)}
#: blocks whose value is the same computed in int32 and cast back: they order, select or move
#: entries, or they add and multiply (modulo 2^32, which the cast back reduces modulo 2^8 or
#: 2^16 as numpy's wrapping does). Not Mean: numpy divides the wrapped sum (reduction())
_WIDENED = frozenset({"MatMul", "BatchMatMul", "Einsum", "Cumsum", "Cumprod", "Sum", "Prod", "Max", "Min",
                      "ArgMax", "ArgMin", "Relu", "Relu6", "ClipByValue", "Pad", "MirrorPad", "Select",
                      "Where", "Diag", "DiagPart", "OneHot", "TopK", "Maximum", "Minimum"})


def _narrow(t) -> bool:
    return isinstance(t, TensorType) and t.dtype in _NARROW


def _lower_widened(lowering, call: OnnxCall):
    """``lowering(call)``, in int32 for a block of _WIDENED with 8- or 16-bit integer operands:
    they are cast to int32 first and its outputs back."""
    types = [t for ts in call.in_types for t in (ts if isinstance(ts, list) else [ts])]
    if call.block not in _WIDENED or not any(_narrow(t) for t in types + call.out_types):
        return lowering(call)
    def wide(t):
        return TensorType(t.shape, np.int32) if _narrow(t) else t
    ins = []
    for value, t in zip(call.ins, call.in_types):
        if isinstance(t, list):
            ins.append([call.cast(v, np.int32) if _narrow(u) else v for v, u in zip(value, t)])
        else:
            ins.append(call.cast(value, np.int32) if _narrow(t) else value)
    in_types = [[wide(u) for u in t] if isinstance(t, list) else (wide(t) if t is not None else None)
                for t in call.in_types]
    widened = dataclasses.replace(call, ins=ins, in_types=in_types, out_types=[wide(t) for t in call.out_types])
    result = lowering(widened)
    result = [result] if isinstance(result, str) else list(result)
    return [call.cast(r, t.dtype) if _narrow(t) else r for r, t in zip(result, call.out_types)]


def near_their_readers(nodes: list, graph_inputs: set) -> list:
    """``nodes`` (in a valid order) with each node that no graph input reaches (a weight's own
    preparation: an instance's ``bias_used``, a constant's Cast) moved to just before its first
    reader, or before the run of its reader's scope when it belongs to another scope. The
    schedule runs such nodes first, away from their layer; beside it, each instance's nodes stay
    one run under its scope, which viewers and importers group by (an import makes them a
    composite again: docs/export.md)."""
    varying = set(graph_inputs)
    producer, deferred = {}, set()
    for k, n in enumerate(nodes):
        if any(i in varying for i in n.input):
            varying.update(n.output)
        else:
            deferred.add(k)
        producer.update((o, k) for o in n.output)
    placed, out = set(), []

    def place(k):    # a deferred node's inputs are deferred nodes' outputs or initializers
        todo = [(k, False)]
        while todo:
            j, ready = todo.pop()
            if j in placed:
                continue
            if ready:
                placed.add(j)
                out.append(nodes[j])
                continue
            todo.append((j, True))
            todo.extend((producer[i], False) for i in reversed(nodes[j].input)
                        if i in producer and producer[i] in deferred and producer[i] not in placed)

    def deferred_inputs(k):
        return [producer[i] for i in nodes[k].input if producer.get(i) in deferred]

    varying_order = [k for k in range(len(nodes)) if k not in deferred]
    start = 0
    while start < len(varying_order):
        # a run of nodes in one scope: what they read from other scopes is placed before it, so
        # that the run is not cut (a page's constant read in the middle of an instance)
        scope = _scope(nodes[varying_order[start]].name)
        end = start
        while end < len(varying_order) and _scope(nodes[varying_order[end]].name) == scope:
            end += 1
        for k in varying_order[start:end]:
            for j in deferred_inputs(k):
                if _scope(nodes[j].name) != scope:
                    place(j)
        for k in varying_order[start:end]:
            for j in deferred_inputs(k):
                place(j)
            placed.add(k)
            out.append(nodes[k])
        start = end
    for k in sorted(deferred):    # read by no node: a graph output, placed last as before
        place(k)
    return out


def _scope(name: str) -> str:
    return name.rsplit("/", 1)[0] if "/" in name else ""
