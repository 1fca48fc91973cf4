"""What a block and a wire show, from the model and the compiled program, as plain data.

``node_data`` builds a block's NodeData (its ports with their dtype classes, inline constants,
errors, the loss mark); the canvas lays it out and paints it (blockflow/gui/canvas/items.py), the
headless render draws the same items. Qt-free: the GUI maps dtype classes to colours.
"""
from __future__ import annotations

import weakref

import numpy as np

from blockflow.project import split_port
from blockflow.spec import shape_text
from blockflow.present.dtypes import dtype_class

__all__ = ["Port", "NodeData", "node_data", "format_inline", "problems_by_node", "program_changes",
           "wire_class"]


class Port:
    """One port as drawn: ``name`` is the model's port name (``x``, ``inputs[2]``)."""

    __slots__ = ("name", "label", "cls", "inline", "fed", "faint", "constraint")

    def __init__(self, name: str, label: str, cls: str = "any", inline: str | None = None,
                 fed: bool = False, faint: bool = False, constraint: str = "any"):
        self.name, self.label, self.cls, self.inline, self.fed, self.faint = name, label, cls, inline, fed, faint
        self.constraint = constraint  # an input's declared dtype constraint (float, T, ...)


class NodeData:
    """What one block shows. Built by the scene from the model and the compiled program."""

    __slots__ = ("node_id", "block", "category", "subtitle", "scope", "inputs", "outputs",
                 "errors", "warnings", "is_loss", "known")

    def __init__(self, node_id, block, category, subtitle, scope, inputs, outputs, errors=(),
                 warnings=(), is_loss=False, known=True):
        self.node_id, self.block, self.category, self.subtitle = node_id, block, category, subtitle
        self.scope, self.inputs, self.outputs = scope, inputs, outputs
        self.errors, self.warnings, self.is_loss, self.known = errors, warnings, is_loss, known

    def same_shape(self, other: "NodeData") -> bool:
        """Would ``other`` lay the block out the same way (so wires need not move)?"""
        return (other is not None and self.block == other.block and self.subtitle == other.subtitle
                and self.scope == other.scope and self.is_loss == other.is_loss
                and [(p.name, p.label, p.inline) for p in self.inputs]
                == [(p.name, p.label, p.inline) for p in other.inputs]
                and [p.name for p in self.outputs] == [p.name for p in other.outputs])


def format_inline(value) -> str:
    """A short text for an inline constant: ``2``, ``[1, 2, 3]``, ``f32[5, 4]``."""
    arr = np.asarray(value)
    if arr.size == 1:
        v = arr.reshape(()).item()
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    if arr.ndim == 1 and arr.size <= 4:
        return "[" + ", ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in arr.tolist()) + "]"
    short = {"float32": "f32", "float64": "f64", "float16": "f16", "int32": "i32", "int64": "i64"}
    return f"{short.get(arr.dtype.name, arr.dtype.name)}{shape_text(arr.shape)}"


def wire_class(program, edge, level: str = "") -> str:
    """The dtype class a wire is drawn in: its inferred dtype's, or "none" when not inferred.
    ``level``: the opened instance (a flat id of ``program``) whose diagram ``edge`` is drawn in."""
    t = program.wire_type(program.flat_wire(level, edge) if level else edge)
    return dtype_class(t.dtype) if t is not None else "none"


_PROBLEMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def problems_by_node(program, level: str = "") -> dict:
    """``{node: (error texts, warning texts)}`` of a program, made once per program (a block
    looked its own up in every diagnostic: a page of 10,000 broken blocks took seconds). Built
    straight into tuples: a page of 10,000 broken blocks makes 20,000 objects here, not 30,000 (the
    collector's pauses during an edit grow with them).

    ``level``: the flat id of the opened instance whose diagram is drawn ("" for the page). Keys
    are the blocks drawn there; a problem of a block inside a closed instance is the instance's,
    its text led by the block's full path (``d1/MatMul_1: ...``)."""
    tables = _PROBLEMS.get(program)
    if tables is None:
        tables = _PROBLEMS[program] = {}
    table = tables.get(level)
    if table is None:
        table = tables[level] = {}
        head = level + "/" if level else ""
        for d in program.diagnostics:
            if d.node is None or not d.node.startswith(head):
                continue
            rest = d.node[len(head):]
            drawn, inner, _ = rest.partition("/")
            lead = f"{d.node}: " if inner else ""
            errors, warnings = table.get(drawn, ((), ()))
            if d.severity == "error":
                errors += (lead + (d.message if not d.port else f"{d.port}: {d.message}"),)
            else:
                warnings += (lead + d.message,)
            table[drawn] = (errors, warnings)
    return table


def program_changes(old, new) -> tuple[set, set]:
    """The nodes and wires whose shown dtypes or problems differ between two programs of a page
    (what a block and a wire draw from a program: dtype classes, errors and warnings)."""
    nodes = {n for n in problems_by_node(old).keys() | problems_by_node(new).keys()
             if problems_by_node(old).get(n) != problems_by_node(new).get(n)}

    def dtype(program, key):
        t = program.port_type(*key)
        return None if t is None else t.dtype

    for key in old.typed_ports() | new.typed_ports():
        if dtype(old, key) != dtype(new, key):
            nodes.add(key[0])
    edges = set()
    for e in old.typed_wires() | new.typed_wires():
        a, b = old.wire_type(e), new.wire_type(e)
        if (a is None) != (b is None) or (a is not None and a.dtype != b.dtype):
            edges.add(e)
            nodes.add(e.dst)
    return nodes, edges


def _input_port(node, fed: dict, program, name, label, constraint, faint, level: str = "") -> Port:
    """One input as drawn: the class of what feeds it (a wire's inferred type, else an inline
    value's), else its declared constraint's."""
    edge = fed.get(name)
    inline = node.inputs.get(name)
    cls = dtype_class(constraint)
    if edge is not None:
        t = (program.wire_type(program.flat_wire(level, edge) if level else edge)
             if program is not None else None)
        if t is not None:
            cls = dtype_class(t.dtype)
    elif inline is not None:
        cls = dtype_class(np.asarray(inline).dtype)
    return Port(name, label, cls, None if inline is None or edge is not None else format_inline(inline),
                edge is not None, faint, constraint)


def _input_ports(node, spec, fed: dict, program, level: str = "") -> list[Port]:
    """The declared inputs; a variadic one shows one empty port after its last used one."""
    inputs = []
    for decl in spec.inputs:
        faint = decl.static or decl.optional
        if decl.variadic:
            used = [split_port(p)[1] for p in list(fed) + list(node.inputs) if split_port(p)[0] == decl.name]
            count = max(decl.min_count, max((i for i in used if i is not None), default=-1) + 2)
            for i in range(count):
                inputs.append(_input_port(node, fed, program, decl.port(i), decl.port(i), decl.dtype, faint, level))
        else:
            inputs.append(_input_port(node, fed, program, decl.name, decl.name, decl.dtype, faint, level))
    return inputs


def _output_names(node, spec, decl, fed: dict) -> list[str]:
    """The ports a (possibly variadic) output declaration shows: as many as its count attr says,
    else as many as are wired."""
    if not decl.variadic:
        return [decl.name]
    counter = spec.attr_map.get(decl.count)
    if counter is not None:
        n = node.attrs.get(decl.count, None if counter.required else counter.default)
        n = n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 64 else 1
    else:
        used = [split_port(p)[1] for p in fed if split_port(p)[0] == decl.count]
        n = max((i for i in used if i is not None), default=-1) + 1
    return [decl.port(i) for i in range(max(n, 1))]


def _output_ports(node_id, node, spec, fed: dict, program) -> list[Port]:
    outputs = []
    for decl in spec.outputs:
        for name in _output_names(node, spec, decl, fed):
            cls = "any"
            t = program.port_type(node_id, name) if program is not None else None
            if t is not None:
                cls = dtype_class(t.dtype)
            elif spec.role in ("placeholder", "variable") or node.block == "Const":
                cls = dtype_class(node.attrs.get("dtype", "float32"))
            outputs.append(Port(name, name, cls, fed=True))
    return outputs


def _type_instance_ports(program, flat: str, inputs, outputs, fed: dict, level: str) -> None:
    """A closed instance's ports say what they carry (``x float32[4,3]``), as a layer's summary
    does: its inside is not drawn, so its labels are where its shapes are read. Unwired or untyped
    ports keep their names."""
    for port in inputs:
        edge = fed.get(port.name)
        t = program.wire_type(program.flat_wire(level, edge) if level else edge) if edge is not None else None
        if t is not None and not port.label.endswith("?"):
            port.label = f"{port.name} {t.describe()}"
    for port in outputs:
        t = program.port_type(flat, port.name)
        if t is not None and not port.label.endswith("?"):
            port.label = f"{port.name} {t.describe()}"


def node_data(page, node_id: str, registry, incoming=(), outgoing=(), program=None, level: str = "") -> NodeData:
    """What a block shows, from the model: ports (an InputList shows one empty port after its
    last wired one), dtype classes (compiled types when ``program`` is given, else the declared
    constraints), inline constants, errors and the loss mark. ``incoming``/``outgoing``: the
    node's wires. ``level``: when ``page`` is a composite's diagram drawn inside an opened
    instance, that instance's flat id in ``program`` (the host page's), which the types and
    problems are read at; a closed instance shows the problems of the blocks inside it."""
    node = page.nodes[node_id]
    spec = registry.get(node.block)
    fed = {e.dst_port: e for e in incoming}
    inputs, outputs = [], []
    flat = f"{level}/{node_id}" if level else node_id
    if spec is not None:
        inputs = _input_ports(node, spec, fed, program, level)
        outputs = _output_ports(flat, node, spec, fed, program)
    known_in = {p.name for p in inputs}
    for port in sorted(fed):            # wires into ports the block does not declare
        if port not in known_in:
            inputs.append(_input_port(node, fed, program, port, port + " ?", "any", True, level))
    known_out = {p.name for p in outputs}
    for port in sorted({e.src_port for e in outgoing}):
        if port not in known_out:
            outputs.append(Port(port, port + " ?", "any", fed=True))
            known_out.add(port)
    errors, warnings = (), ()
    if program is not None:
        errors, warnings = problems_by_node(program, level).get(node_id, ((), ()))
        if spec is not None and node.block.startswith("@"):
            _type_instance_ports(program, flat, inputs, outputs, fed, level)
    return NodeData(node_id, node.block, spec.category if spec else "unknown",
                    node.label or node_id, page.scope, inputs, outputs, errors, warnings,
                    page.is_loss(node_id), spec is not None)
