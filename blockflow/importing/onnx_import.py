"""An ONNX model as a blockflow project (docs/import.md): the face of the import.

``import_onnx(path)`` reads the file (onnx_read.py), folds what is constant (onnx_fold.py), maps
each remaining node to blocks (the ``onnx_map_*`` tables through onnx_mapping.py), marks the
graph's outputs, lays the page out (onnx_layout.py) and compiles it, so what it returns runs.
A model with ops that have no faithful mapping is refused with the whole list of them.
"""
from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from blockflow.budget import format_size
from blockflow.compile.compiler import compile_page, compile_project
from blockflow.composite import ProjectBlocks
from blockflow.importing.errors import ImportFailure, UnsupportedOps
from blockflow.importing.onnx_build import Known, PageBuilder, Refused, Unsupported, Wire, check_tensor, node_id_from
from blockflow.importing.onnx_fold import FOLDERS, FoldRefused, fold
from blockflow.importing.onnx_layout import LOSS_FRAME, lay_out, lay_out_again
from blockflow.importing.onnx_mapping import Call, mapping_table
from blockflow.importing.onnx_names import float_constants, node_names, shared_prefix
from blockflow.importing.onnx_read import DTYPES, OnnxModel, ValueInfo, cut_name, read_onnx
from blockflow.importing.onnx_units import nodes_as_composites, order_by_use, units_as_composites
from blockflow.importing.onnx_verdict import compile_failure
from blockflow.io import rules
from blockflow.project import Project
from blockflow.registry import Registry, default_registry

__all__ = ["ImportReport", "import_onnx", "import_model"]


@dataclass
class ImportReport:
    """What an import made, for the command line's summary and the editor's status bar."""

    source: str
    opset: int
    producer: str
    onnx_nodes: int
    ops: Counter = field(default_factory=Counter)
    folded: int = 0
    blocks: int = 0
    variables: int = 0
    parameters: int = 0
    inputs: dict = field(default_factory=dict)     # ONNX input name -> Placeholder id
    outputs: dict = field(default_factory=dict)    # ONNX output name -> marker (Identity) id
    #: the units grouped: framed, or made composite instances
    groups: int = 0
    #: the composites the units and the nodes mapped to several blocks became (0: framed)
    composites: int = 0
    #: the ONNX nodes mapped to several blocks made one composite instance each
    nodes_grouped: int = 0

    def lines(self) -> list[str]:
        nodes = (f" and {self.nodes_grouped} node{'s' if self.nodes_grouped != 1 else ''} of several blocks"
                 if self.nodes_grouped else "")
        grouped = (f"{self.groups} units{nodes} as instances of {self.composites} composites" if self.composites
                   else f"{self.groups} frames")
        made = f"{self.blocks} blocks ({self.variables} Variables holding {self.parameters:,} parameters), {grouped}"
        return [f"imported {self.source} (opset {self.opset}{', from ' + self.producer if self.producer else ''}): "
                f"{self.onnx_nodes} ONNX nodes, {self.folded} folded into constants; {made}",
                "inputs: " + ", ".join(f"{cut_name(k)} -> {v}" for k, v in self.inputs.items()),
                "outputs: " + ", ".join(f"{cut_name(k)} -> {v}" for k, v in self.outputs.items())]


#: how the units of a model are grouped: as composite instances (the default), or framed on one page
GROUPINGS = ("composites", "frames")


def import_onnx(path, *, page_name: str | None = None, registry: Registry | None = None,
                group: str = "composites"):
    """``(project, report)`` made from the ONNX file ``path``; ImportFailure (UnsupportedOps for
    ops with no faithful mapping) naming what is wrong. ``group``: one of GROUPINGS."""
    model = read_onnx(path)
    name = page_name or _page_name(model, path)
    return import_model(model, name, registry, group)


def _page_text(model: OnnxModel, report: ImportReport, added: list) -> str:
    """The page's note: where the model came from, what it takes and gives, what was added."""
    source = os.path.basename(model.source)
    lines = [f"Imported from the ONNX model {source} (opset {model.opset}"
             + (f", made by {model.producer}" if model.producer else "") + ").",
             "", "Inputs: " + ", ".join(f"{cut_name(k)} (Placeholder {v})" for k, v in report.inputs.items())
             + ". Each has a stand-in feed (a ramp from 0 to 1) until you give it yours.",
             "Outputs: " + ", ".join(f"{cut_name(k)} (marked by {v})" for k, v in report.outputs.items()) + "."]
    if report.composites:
        lines += ["", f"Each unit of the model (a name scope, or a repeated unit like ResNet's res3_1), and each "
                      f"ONNX node that takes several blocks (a Conv with a bias: Conv2D and BiasAdd), is an "
                      f"instance of a composite block: {report.groups} units and {report.nodes_grouped} nodes, "
                      f"{report.composites} composites, those alike but for their weights and sizes sharing one. "
                      f"Double-click an instance to see inside it; Ungroup (Ctrl+Shift+G) puts its blocks back."]
    if added:
        lines += ["", "The blocks framed as 'loss (added by the import)' are not part of the model: they "
                      "give Backward and training a scalar to start from."]
    if model.doc:
        lines += ["", model.doc[:2000]]
    return "\n".join(lines)


def _page_name(model: OnnxModel, path) -> str:
    stem = os.path.basename(str(path))
    stem = stem[:-5] if stem.endswith(".onnx") else stem
    text = "".join(ch for ch in (model.graph_name or stem) if ch.isprintable() and ch != "/")
    # a leading '@' names a composite's diagram, never a page (the page could not be made)
    text = text.strip().lstrip("@").strip()
    return (text or "model")[:60]


def import_model(model: OnnxModel, page_name: str = "model", registry: Registry | None = None,
                 group: str = "composites"):
    """``(project, report)`` made from a read model (see import_onnx)."""
    if group not in GROUPINGS:
        raise ValueError(f"group must be one of {GROUPINGS}, not {group!r}")
    registry = registry or default_registry()
    project = Project()
    page = project.add_page(page_name)
    names, stems = node_names(model, float_constants(model, FOLDERS))
    layers = [n for n, node in zip(names, model.nodes) if node.op not in FOLDERS]   # not the weights' makers
    strip = shared_prefix(layers + [v.name for v in model.inputs])
    names = [n[len(strip):] if n.startswith(strip) else n for n in names]
    stems = [n[len(strip):] if n.startswith(strip) else n for n in stems]
    importer = _Importer(model, PageBuilder(page, registry, strip), names)
    importer.run()
    report = importer.report
    lay_out(page, importer.builder, stems, importer.added)
    report.groups = sum(f.title != LOSS_FRAME for f in page.frames)
    program = _check_compiles(project, model.source, importer)
    if group == "composites":
        _as_composites(project, page, importer, registry, program, [n.op for n in model.nodes])
    page.text = _page_text(model, report, importer.added)
    return project, report


def _as_composites(project, page, importer, registry, program, ops) -> None:
    """Each ONNX node mapped to several blocks, then each unit, made a composite instance, and the
    page laid out again (onnx_units.py)."""
    report, builder, source = importer.report, importer.builder, importer.model.source
    frames = list(page.frames)
    moved = nodes_as_composites(project, page, registry, program, builder.origin, ops, source)
    report.nodes_grouped = len(set(moved.values()))
    if moved:     # the units hold the nodes' instances now; the program, their ports
        page.frames = [replace(f, blocks=tuple(dict.fromkeys(moved.get(b, b) for b in f.blocks))) for f in frames]
        program = _check_compiles(project, source)
    if report.groups:
        report.groups = units_as_composites(project, page, registry, program, source)
    report.composites = len(project.composites)
    if project.composites:
        # compiled again: the check that grouping kept a working diagram, and the types the
        # instances' ports show, which the layout makes room for
        program = _check_compiles(project, source)
        lay_out_again(page, builder, ProjectBlocks(registry, project), program, importer.added)
        order_by_use(project, page)


_NO_TYPE = ValueInfo("")

#: the largest input given a stand-in feed (elements)
STAND_IN_MAX = 4_000_000


def _stand_in_feed(dtype, shape):
    """A feed to run the imported page with before the user gives one: the ramp ONNX's backend
    test runner feeds its models (0, 1/n, 2/n, ... in row-major order) for a float input, zeros
    for another; None for an input too large to keep in the project."""
    n = math.prod(shape)      # Python ints: numpy's product would overflow for a huge shape
    if n > STAND_IN_MAX:
        return None
    if dtype.kind == "f":
        return (np.arange(n).reshape(shape) / max(n, 1)).astype(dtype)
    return np.zeros(shape, dtype)


def _softmax_logits(page, marker: str):
    """(node, port) of the logits a Softmax turned into the output marked by ``marker``
    (through Reshapes and Identities), or None."""
    feeding = {(e.dst, e.dst_port): e for e in page.edges}
    e = feeding.get((marker, "input"))
    while e is not None and page.nodes[e.src].block in ("Reshape", "Identity"):
        port = "tensor" if page.nodes[e.src].block == "Reshape" else "input"
        e = feeding.get((e.src, port))
    if e is None or page.nodes[e.src].block != "Softmax":
        return None
    into = feeding.get((e.src, "logits"))
    return (into.src, into.src_port) if into is not None else None


class _Importer:
    def __init__(self, model: OnnxModel, builder: PageBuilder, names: list[str], with_loss: bool = True):
        self.model, self.builder, self.names, self.with_loss = model, builder, names, with_loss
        self.added: list = []
        #: {output of a Shape not folded: its sizes, None where open}
        self.sizes: dict[str, tuple] = {}
        self.table = mapping_table()
        self.env: dict = {}
        self.refused: dict[str, list] = {}
        self.report = ImportReport(model.source, model.opset, model.producer, len(model.nodes))
        builder.held = sum(a.nbytes for a in model.initializers.values())
        self.read = frozenset([i for n in model.nodes for i in n.inputs if i] + [v.name for v in model.outputs])
        self.readers = Counter(i for n in model.nodes for i in set(n.inputs) if i)

    def refuse(self, op: str, reason: str, node_label: str) -> None:
        self.refused.setdefault(op, []).append((reason, node_label))

    def run(self) -> None:
        m, b = self.model, self.builder
        for name, arr in m.initializers.items():
            self.env[name] = Known(arr, name, param=True)
        for vi in m.inputs:
            self.env[vi.name] = self._placeholder(vi)
        self._one_producer_each()
        if m.invalid is not None and m.invalid[0] is None:
            raise ImportFailure(f"{m.source}: the model is not valid ONNX: onnx's shape inference says "
                                f"'{m.invalid[1]}'")
        for node in m.nodes:
            self._node(node)
        if self.refused:
            raise UnsupportedOps(m.source, self.refused)
        for vi in m.outputs:
            self._output(vi)
        if self.with_loss:
            self._loss()
        r = self.report
        r.blocks = len(b.page.nodes)
        r.variables = len(b.variables)
        r.parameters = sum(int(np.prod(b.page.nodes[v].attrs["shape"])) for v in b.variables.values())

    def _placeholder(self, vi) -> Wire:
        where = f"{self.model.source}: graph input '{cut_name(vi.name)}'"
        if vi.refused_type:
            raise ImportFailure(f"{where} has dtype {vi.refused_type}, which a project does not hold "
                                f"({', '.join(sorted(set(DTYPES.values())))})")
        if vi.shape is not None:
            sizes = [d for d in vi.shape if isinstance(d, int)]
            if len(vi.shape) > rules.MAX_NDIM:
                raise ImportFailure(f"{where} has {len(vi.shape)} dimensions; the limit is {rules.MAX_NDIM}")
            if any(d < 0 for d in sizes):
                raise ImportFailure(f"{where} has a negative size in its shape {list(vi.shape)}")
            if math.prod(sizes) > rules.MAX_ARRAY_ELEMENTS:
                raise ImportFailure(f"{where} has {math.prod(sizes):,} elements; the limit for one array is "
                                    f"{rules.MAX_ARRAY_ELEMENTS:,}")
        if vi.dtype is None or vi.shape is None:
            raise ImportFailure(f"{where} has no tensor type with a shape (its dtype or rank is unknown)")
        shape = [d if isinstance(d, int) else -1 for d in vi.shape]
        symbolic = ", ".join(str(d) if d is not None else "?" for d in vi.shape)
        nid = self.builder.add("Placeholder", {}, {"dtype": vi.dtype.name, "shape": shape},
                               node_id_from(vi.name, self.builder.strip), None,
                               label=f"{vi.name} [{symbolic}]"[:120])
        self.report.inputs[vi.name] = nid
        feed = _stand_in_feed(vi.dtype, [d if d > 0 else 1 for d in shape])
        if feed is not None:
            self.builder.page.feeds[nid] = feed
        return Wire(nid, "output", vi.dtype, vi.shape)

    def _output(self, vi) -> None:
        value = self.env.get(vi.name)
        if value is None:
            raise ImportFailure(f"{self.model.source}: graph output '{cut_name(vi.name)}' is made by no node")
        base = node_id_from(vi.name, self.builder.strip)
        nid = self.builder.add("Identity", {"input": value}, {}, base + "_out", None,
                               label=f"output {vi.name}"[:120])
        self.report.outputs[vi.name] = nid

    def _one_producer_each(self) -> None:
        """Refuse a value written twice (by two nodes, or by a node over a graph input or an
        initializer): ONNX gives each value one producer, and readers would see different ones."""
        made = set(self.env)
        for node in self.model.nodes:
            for name in node.outputs:
                if not name:
                    continue
                if name in made:
                    raise ImportFailure(f"{self.model.source}: node '{node.label}' writes '{cut_name(name)}', which "
                                        f"{'another node' if name not in self.env else 'a graph input or initializer'} "
                                        f"already makes (every value has one producer)")
                made.add(name)

    def _loss(self) -> None:
        """A scalar for the editor's Backward and for training, which an inference model lacks:
        for a classifier (an output made by Softmax over 2-D logits) the mean cross-entropy of
        the logits against a ``labels`` Placeholder (class 0 until fed), else half the output's
        sum of squares (L2Loss). Framed and noted as the import's, not the model's."""
        floats = [(name, nid) for name, nid in self.report.outputs.items()
                  if (self.model.types.get(name) or _NO_TYPE).dtype is not None
                  and self.model.types[name].dtype.kind == "f"]
        if len(floats) != 1:
            return
        page, b = self.builder.page, self.builder
        marker = floats[0][1]
        src = _softmax_logits(page, marker)
        shape = None
        if src is not None:   # its shape: the page so far, compiled
            typed = compile_page(page, b.registry).port_type(*src)
            shape = typed.shape if typed is not None and len(typed.shape) == 2 else None
        if shape is not None:
            batch = shape[0] if shape and isinstance(shape[0], int) else 1
            labels = b.add("Placeholder", {}, {"dtype": "int64", "shape": [shape[0] if isinstance(shape[0], int) else -1]},
                           "labels", None, label="labels: the class of each example (0 until fed)")
            page.feeds[labels] = np.zeros(batch, np.int64)
            b.attached.append(labels)
            ce = b.add("SparseSoftmaxCrossEntropyWithLogits", {"features": Wire(*src), "labels": Wire(labels, "output")},
                       {}, "cross_entropy", None)
            loss = b.add("Mean", {"input": Wire(ce, "loss")}, {}, "loss", None, label="loss (added by the import)")
            added = [labels, ce, loss]
        else:
            loss = b.add("L2Loss", {"t": Wire(marker, "output")}, {}, "loss", None,
                         label="loss: half the output's sum of squares (added by the import)")
            added = [loss]
        page.loss = loss
        self.added = added

    def _node(self, node) -> None:
        values = self._inputs(node)
        op = node.op if not node.domain else f"{node.domain}:{node.op}"
        invalid = self.model.invalid
        if invalid is not None and invalid[0] == node.index:
            invalid = ImportFailure(f"{self.model.source}: node '{node.label}' ({op}): the model is not valid "
                                    f"ONNX: onnx's shape inference says '{invalid[1]}'")
        else:
            invalid = None
        try:
            self._place(node, values, op)
        except (ImportFailure, Unsupported):
            raise   # the import's own words, which name what is wrong more exactly than onnx's
        except Exception as exc:  # a node its op's definition does not allow (too few inputs, ...)
            raise invalid or self._malformed(node, op, exc) from None
        if invalid is not None:   # mapped, or listed as unsupported: onnx's verdict stands
            raise invalid

    def _inputs(self, node) -> list:
        """The values ``node`` reads (None for an input left out)."""
        values = []
        for name in node.inputs:
            if not name:
                values.append(None)
                continue
            if name not in self.env:
                if any(name in n.outputs for n in self.model.nodes[node.index + 1:]):
                    raise ImportFailure(f"{self.model.source}: node '{node.label}' reads '{cut_name(name)}' before the "
                                        f"node that makes it (the graph is not in topological order)")
                raise ImportFailure(f"{self.model.source}: node '{node.label}' reads '{cut_name(name)}', which no "
                                    f"node, input or initializer makes")
            values.append(self.env[name])
        return values

    def _place(self, node, values, op) -> None:
        """Fold ``node``, or map it to blocks, or list it as unsupported; what it makes goes in env.
        A mapping's Refused stops the import naming the node; another exception is a node its
        op's definition does not allow, left to the caller."""
        if any(v is _FAILED for v in values):
            if op not in self.table:
                self.refuse(op, "no mapping", node.label)
            self._fail_outputs(node)
            return
        if self._fold(node, values) or self._fold_known_sizes(node, values):
            return
        mapping = self.table.get(op)
        if mapping is None:
            self.refuse(op, "no mapping", node.label)
            self._fail_outputs(node)
            return
        try:
            outs = mapping.fn(Call(node, values, self.builder, self.model.types, self.model.opset, self.read,
                                   self.names[node.index]))
            self._check_outputs(node)   # after the mapping's own checks, whose words are more exact
        except Unsupported as exc:
            self.refuse(op, str(exc), node.label)
            self._fail_outputs(node)
            return
        except Refused as exc:
            raise ImportFailure(f"{self.model.source}: node '{node.label}' ({op}): {exc}") from None
        outs = outs if isinstance(outs, list) else [outs]
        self.report.ops[op] += 1
        if op == "Shape" and not node.attrs.get("start") and node.attrs.get("end") is None:
            info = self.model.types.get(node.inputs[0])
            if info is not None and info.shape is not None:   # what is known of it, for _fold_known_sizes
                self.sizes[node.outputs[0]] = tuple(d if isinstance(d, int) else None for d in info.shape)
        for name, value in zip(node.outputs, outs):
            if name:
                self.env[name] = value

    def _check_outputs(self, node) -> None:
        """Refused for an output onnx's shape inference sizes below 0 (a window larger than its
        padded input: onnx infers the size without a word, onnxruntime stops when it runs) or
        past the limits of one tensor (an Expand, Tile or Pad to 10^10 entries): not a diagram
        that fails to compile, blamed on the import. (The blocks are made by then, but nothing
        of the output's size: they hold sizes, not values.)"""
        for name in node.outputs:
            info = self.model.types.get(name) if name else None
            if info is None or info.shape is None:
                continue
            if any(isinstance(d, int) and d < 0 for d in info.shape):
                raise Refused(f"the model is not valid ONNX: onnx's shape inference gives its output "
                              f"'{cut_name(name)}' the shape {list(info.shape)}, a size below 0")
            if all(isinstance(d, int) for d in info.shape):
                check_tensor(info.dtype, info.shape, f"its output '{cut_name(name)}'")

    def _fold(self, node, values) -> bool:
        """Fold ``node`` when every input is known (or, for Shape, when its input's shape is)."""
        if node.domain or node.op not in FOLDERS:
            return False
        if node.op == "Shape" and isinstance(values[0], Wire):
            info = self.model.types.get(node.inputs[0])
            shape = info.static_shape if info is not None else None
            known = values[0].shape
            if shape is None and known is not None and all(isinstance(d, int) for d in known):
                shape = known   # a mapping knew it where the model's shape inference lost it
            if shape is None:
                return False
            # a zero-stride stand-in of that shape: Shape reads only the sizes
            values = [Known(np.broadcast_to(np.zeros((), np.uint8), shape))]
        if not all(v is None or isinstance(v, Known) for v in values):
            return False
        try:
            outs = fold(node, [None if v is None else v.value for v in values], self.model.opset,
                        room=self.builder.budget - self.builder.held)
        except FoldRefused as exc:
            raise ImportFailure(f"{self.model.source}: node '{node.label}' ({node.op}): {exc}") from None
        param = node.op == "ConstantOfShape" or any(isinstance(v, Known) and v.param for v in values)
        tied = None
        if node.op in _LAYOUT_OPS and isinstance(values[0], Known) and values[0].param and \
                values[0].dtype.kind == "f" and self.readers[values[0].name] > 1:
            # a weight the model reads twice (a tied embedding, also read through a Transpose):
            # the folded copy remembers it, so a Variable of it is the weight's own, rearranged
            tied = (values[0], node.op, tuple(node.attrs.get("perm") or ()))
        for name, arr in zip(node.outputs, outs):
            b = self.builder
            b.held += arr.nbytes
            if b.held > b.budget:
                raise ImportFailure(f"{self.model.source}: node '{node.label}' ({node.op}): the model's constants "
                                    f"reach {format_size(b.held)}, more than the memory budget of "
                                    f"{format_size(b.budget)} ({b.budget_from}; docs/limits.md)")
            if name:
                self.env[name] = Known(arr, name, param and arr.dtype.kind == "f", tied)
        self.report.folded += 1
        return True

    def _malformed(self, node, op, exc) -> ImportFailure:
        return ImportFailure(f"{self.model.source}: node '{node.label}' ({op}) does not fit the op's definition: "
                             f"{type(exc).__name__}: {exc}")

    def _fold_known_sizes(self, node, values) -> bool:
        """Fold a Gather or Slice of a Shape whose picked sizes are known though others are not
        (the classes of [batch, classes] with an open batch): exporters size constants so."""
        if node.domain or node.op not in ("Gather", "Slice") or not node.inputs or node.inputs[0] not in self.sizes:
            return False
        if not all(isinstance(v, Known) for v in values[1:] if v is not None):
            return False
        dims = np.array(self.sizes[node.inputs[0]], dtype=object)
        try:
            (picked,) = fold(node, [dims] + [None if v is None else v.value for v in values[1:]], self.model.opset)
        except (FoldRefused, TypeError, ValueError):
            return False
        if not all(isinstance(d, (int, np.integer)) for d in np.asarray(picked).reshape(-1)):
            return False
        self.env[node.outputs[0]] = Known(np.asarray(picked, dtype=np.int64))
        self.report.folded += 1
        return True

    def _fail_outputs(self, node) -> None:
        for name in node.outputs:
            if name:
                self.env[name] = _FAILED


#: ops that only move a tensor's entries: folding one of a weight read elsewhere too would make a
#: second Variable of the same weight
_LAYOUT_OPS = frozenset({"Transpose", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten"})

_FAILED = Known(np.zeros(0), "(refused)")


def _check_compiles(project: Project, source: str, importer: _Importer | None = None):
    """The project's program; ImportFailure when it does not compile. With the ``importer`` (the
    diagram as mapped), an error is named with the ONNX node its block was made for and said in
    the model's terms (onnx_verdict.py); after grouping (no importer), an error is the import's."""
    program = compile_project(project)
    if program.ok:
        return program
    if importer is not None:
        raise compile_failure(program, importer.model, importer.builder.origin, source)
    errors = "; ".join(str(d) for d in program.errors[:5])
    raise ImportFailure(f"{source}: the imported diagram does not compile (a bug in the import, "
                        f"please report it): {errors}")
