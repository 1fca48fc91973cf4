"""What hovering over the canvas tells: a wire's inferred type, a port's, a block's problems,
its run results and gradients."""
from __future__ import annotations

import html

from PySide6.QtCore import QPointF

from blockflow.spec import SCOPE_PORT
from blockflow.gui.common.markup import markup_html
from blockflow.gui.common.plaintext import literal

__all__ = ["tooltip_at"]


class _NotCompiled:
    """Stands for a page's program in a tooltip until its first compile lands: nothing inferred."""

    @staticmethod
    def port_type(node, port):
        return None

    @staticmethod
    def wire_type(edge):
        return None


_NOT_COMPILED = _NotCompiled()


class _AtLevel:
    """A program's types asked in the ids of the diagram drawn at ``level``."""

    def __init__(self, program, level: str):
        self.program, self.level = program, level

    def port_type(self, node, port):
        return self.program.port_type(self.program.flat_id(self.level, node), port)

    def wire_type(self, edge):
        return self.program.wire_type(self.program.flat_wire(self.level, edge) if self.level else edge)


def _with_lines(text: str, lines: list) -> str:
    """``text`` (plain) followed by HTML ``lines``, as one rich-text tooltip (plain when none)."""
    if not lines:
        return literal(text)
    return "<br>".join([html.escape(text), *lines])


def tooltip_at(view, sp: QPointF) -> str:
    """The tooltip at scene point ``sp`` of ``view`` ("" for none). Qt shows it as rich text when
    it looks like some: file text in it is escaped (literal)."""
    item, port = view.port_at(sp)
    # What the canvas shows; the page may be compiling (off the UI thread) after an edit. Inside
    # an opened instance that is the host page's program, where a drawn block is level/block.
    scene = view.diagram_scene()
    program = scene.program
    if program is None or not scene.level:
        program = view.doc.ready_program(scene.program_page) or program
    program = _AtLevel(program, scene.level) if program is not None else _NOT_COMPILED
    if item is not None and port is not None:
        return _port_tooltip(view, program, item, port)
    if item is None:
        item = view.node_at(sp)
    if item is not None:
        return _block_tooltip(view, item)
    edge = view.edge_at(sp)
    if edge is not None:
        t = program.wire_type(edge.edge)
        return _with_lines(f"{edge.edge}: {t.describe() if t is not None else 'type not inferred'}",
                           view.gradients.edge_tooltip(edge.edge))
    return ""


def _port_doc(view, item, port: str) -> list:
    """The port's documentation from its block's declaration, rendered (none: [])."""
    spec = view.doc.blocks.get(item.data.block)
    if spec is None:
        return []
    base = port.split("[", 1)[0]         # a variadic input's ports are values[0], values[1], ...
    decl = (spec.output_map if item.is_output(port) else spec.input_map).get(base)
    doc = getattr(decl, "doc", "") if decl is not None else ""
    return [f"<i>{markup_html(doc)}</i>"] if doc else []


def _port_tooltip(view, program, item, port: str) -> str:
    nid = item.node_id
    page = view.diagram_scene().page
    if port == SCOPE_PORT:
        return literal(f"scope: {page.scope} (full name {page.full_name(nid)})")
    about = _port_doc(view, item, port)
    if item.is_output(port):
        t = program.port_type(nid, port)
        return _with_lines(f"{nid}.{port}: {t.describe() if t is not None else 'not inferred'}", about)
    edge = next((e.edge for e in item.edges if e.edge.dst == nid and e.edge.dst_port == port), None)
    if edge is not None:
        t = program.wire_type(edge)
        return _with_lines(f"{nid}.{port} <- {edge.src}.{edge.src_port}: "
                           f"{t.describe() if t else 'not inferred'}", about + view.gradients.edge_tooltip(edge))
    decl = next((p for p in item.data.inputs if p.name == port), None)
    return _with_lines(f"{nid}.{port}: expects {decl.constraint if decl else 'any'}"
                       + (f", inline {decl.inline}" if decl is not None and decl.inline else ""), about)


def _block_tooltip(view, item) -> str:
    d = item.data
    spec = view.doc.blocks.get(d.block)
    esc = html.escape     # names and messages are the file's text: shown, never parsed
    lines = [f"<b>{esc(d.block)}</b> {esc(view.diagram_scene().page.full_name(d.node_id))}"]
    if spec is not None and spec.summary:
        lines.append(markup_html(spec.summary))       # ``code`` in a monospace span, not raw
    lines.append("<i>F1: its page in the Block Reference</i>")
    lines += [f"<span style='color:#e0403a'>error: {esc(m)}</span>" for m in d.errors]
    lines += [f"warning: {esc(m)}" for m in d.warnings]
    if item.results is not None:
        lines += item.results.tooltip_lines([p.name for p in d.outputs])
    lines += view.gradients.node_tooltip(d.node_id)
    return "<br>".join(lines)
