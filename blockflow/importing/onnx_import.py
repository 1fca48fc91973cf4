"""An ONNX model as a blockflow project (docs/import.md): the face of the import.

``import_onnx(path)`` reads the file (onnx_read.py), folds what is constant (onnx_fold.py), maps
each remaining node to blocks (the ``onnx_map_*`` tables through onnx_mapping.py), marks the
graph's outputs, lays the page out (onnx_layout.py) and compiles it, so what it returns runs.
A model with ops that have no faithful mapping is refused with the whole list of them.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from blockflow.budget import format_size, memory_budget
from blockflow.compile.compiler import compile_project
from blockflow.importing.errors import ImportFailure, UnsupportedOps
from blockflow.importing.onnx_build import Known, PageBuilder, Unsupported, Wire, node_id_from
from blockflow.importing.onnx_fold import FOLDERS, FoldRefused, fold
from blockflow.importing.onnx_layout import lay_out
from blockflow.importing.onnx_mapping import Call, mapping_table
from blockflow.importing.onnx_read import OnnxModel, read_onnx
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
    groups: int = 0

    def lines(self) -> list[str]:
        made = (f"{self.blocks} blocks ({self.variables} Variables holding {self.parameters:,} parameters), "
                f"{self.groups} frames")
        return [f"imported {self.source} (opset {self.opset}{', from ' + self.producer if self.producer else ''}): "
                f"{self.onnx_nodes} ONNX nodes, {self.folded} folded into constants; {made}",
                "inputs: " + ", ".join(f"{k} -> {v}" for k, v in self.inputs.items()),
                "outputs: " + ", ".join(f"{k} -> {v}" for k, v in self.outputs.items())]


def import_onnx(path, *, page_name: str | None = None, registry: Registry | None = None):
    """``(project, report)`` made from the ONNX file ``path``; ImportFailure (UnsupportedOps for
    ops with no faithful mapping) naming what is wrong."""
    model = read_onnx(path)
    name = page_name or _page_name(model, path)
    return import_model(model, name, registry)


def _page_name(model: OnnxModel, path) -> str:
    stem = os.path.basename(str(path))
    stem = stem[:-5] if stem.endswith(".onnx") else stem
    text = "".join(ch for ch in (model.graph_name or stem) if ch.isprintable() and ch != "/").strip()
    return (text or "model")[:60]


def import_model(model: OnnxModel, page_name: str = "model", registry: Registry | None = None):
    """``(project, report)`` made from a read model (see import_onnx)."""
    registry = registry or default_registry()
    project = Project()
    page = project.add_page(page_name)
    importer = _Importer(model, PageBuilder(page, registry, _common_prefix(model)))
    importer.run()
    report = importer.report
    lay_out(page, importer.builder, model)
    report.groups = len(page.frames)
    _check_compiles(project, model.source)
    return project, report


def _common_prefix(model: OnnxModel) -> str:
    """A scope every value name shares (caffe2's ``gpu_0/``): left out of node ids."""
    names = [o for n in model.nodes for o in n.outputs if o] + [v.name for v in model.inputs]
    if not names:
        return ""
    first = names[0]
    cut = first.find("/") + 1
    if cut and all(n.startswith(first[:cut]) for n in names):
        return first[:cut]
    return ""


class _Importer:
    def __init__(self, model: OnnxModel, builder: PageBuilder):
        self.model, self.builder = model, builder
        self.table = mapping_table()
        self.env: dict = {}
        self.refused: dict[str, list] = {}
        self.report = ImportReport(model.source, model.opset, model.producer, len(model.nodes))
        self.held = sum(a.nbytes for a in model.initializers.values())
        self.budget, self.budget_from = memory_budget()
        self.read = frozenset([i for n in model.nodes for i in n.inputs if i] + [v.name for v in model.outputs])

    def refuse(self, op: str, reason: str, node_label: str) -> None:
        self.refused.setdefault(op, []).append((reason, node_label))

    def run(self) -> None:
        m, b = self.model, self.builder
        for name, arr in m.initializers.items():
            self.env[name] = Known(arr, name, param=True)
        for vi in m.inputs:
            self.env[vi.name] = self._placeholder(vi)
        for node in m.nodes:
            self._node(node)
        if self.refused:
            raise UnsupportedOps(m.source, self.refused)
        for vi in m.outputs:
            self._output(vi)
        r = self.report
        r.blocks = len(b.page.nodes)
        r.variables = len(b.variables)
        r.parameters = sum(int(np.prod(b.page.nodes[v].attrs["shape"])) for v in b.variables.values())

    def _placeholder(self, vi) -> Wire:
        if vi.dtype is None or vi.shape is None:
            raise ImportFailure(f"{self.model.source}: graph input '{vi.name}' has no tensor type with a "
                                f"shape (its dtype or rank is unknown)")
        shape = [d if isinstance(d, int) else -1 for d in vi.shape]
        symbolic = ", ".join(str(d) if d is not None else "?" for d in vi.shape)
        nid = self.builder.add("Placeholder", {}, {"dtype": vi.dtype.name, "shape": shape},
                               node_id_from(vi.name, self.builder.strip), None,
                               label=f"{vi.name} [{symbolic}]"[:120])
        self.report.inputs[vi.name] = nid
        return Wire(nid, "output", vi.dtype, vi.shape)

    def _output(self, vi) -> None:
        value = self.env.get(vi.name)
        if value is None:
            raise ImportFailure(f"{self.model.source}: graph output '{vi.name}' is made by no node")
        base = node_id_from(vi.name, self.builder.strip)
        nid = self.builder.add("Identity", {"input": value}, {}, base + "_out", None,
                               label=f"output {vi.name}"[:120])
        self.report.outputs[vi.name] = nid

    def _node(self, node) -> None:
        values = []
        for name in node.inputs:
            if not name:
                values.append(None)
                continue
            if name not in self.env:
                if any(name in n.outputs for n in self.model.nodes[node.index + 1:]):
                    raise ImportFailure(f"{self.model.source}: node '{node.label}' reads '{name}' before the "
                                        f"node that makes it (the graph is not in topological order)")
                raise ImportFailure(f"{self.model.source}: node '{node.label}' reads '{name}', which no "
                                    f"node, input or initializer makes")
            values.append(self.env[name])
        op = node.op if not node.domain else f"{node.domain}:{node.op}"
        if any(v is _FAILED for v in values):
            if op not in self.table:
                self.refuse(op, "no mapping", node.label)
            self._fail_outputs(node)
            return
        if self._fold(node, values):
            return
        mapping = self.table.get(op)
        if mapping is None:
            self.refuse(op, "no mapping", node.label)
            self._fail_outputs(node)
            return
        try:
            outs = mapping.fn(Call(node, values, self.builder, self.model.types, self.model.opset, self.read))
        except Unsupported as exc:
            self.refuse(op, str(exc), node.label)
            self._fail_outputs(node)
            return
        outs = outs if isinstance(outs, list) else [outs]
        self.report.ops[op] += 1
        for name, value in zip(node.outputs, outs):
            if name:
                self.env[name] = value

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
            outs = fold(node, [None if v is None else v.value for v in values], self.model.opset)
        except FoldRefused as exc:
            raise ImportFailure(f"{self.model.source}: node '{node.label}' ({node.op}): {exc}") from None
        param = node.op == "ConstantOfShape" or any(isinstance(v, Known) and v.param for v in values)
        for name, arr in zip(node.outputs, outs):
            self.held += arr.nbytes
            if self.held > self.budget:
                raise ImportFailure(f"{self.model.source}: node '{node.label}' ({node.op}): the model's constants "
                                    f"reach {format_size(self.held)}, more than the memory budget of "
                                    f"{format_size(self.budget)} ({self.budget_from}; docs/limits.md)")
            if name:
                self.env[name] = Known(arr, name, param and arr.dtype.kind == "f")
        self.report.folded += 1
        return True

    def _fail_outputs(self, node) -> None:
        for name in node.outputs:
            if name:
                self.env[name] = _FAILED


_FAILED = Known(np.zeros(0), "(refused)")


def _check_compiles(project: Project, source: str) -> None:
    program = compile_project(project)
    if not program.ok:   # a mapping that made a diagram that does not type: a bug to report
        errors = "; ".join(str(d) for d in program.errors[:5])
        raise ImportFailure(f"{source}: the imported diagram does not compile (a bug in the import, "
                            f"please report it): {errors}")
