"""The Document's edits of a page's layout beyond positions (a mixin of Document, kept apart so
that document.py stays readable): reroute points on wires and frames around blocks
(blockflow/page_layout.py). Each edit is one undo step; a frame moved with its blocks is one too.
"""
from __future__ import annotations

from dataclasses import replace

from blockflow.errors import ProjectError
from blockflow.page_layout import MAX_FRAMES, Frame, bends_problem, frame_problem
from blockflow.gui.document import commands as C

__all__ = ["LayoutEdits"]


class LayoutEdits:
    """Reroute points and frames; mixed into Document (uses its pages and undo stack). Each
    refuses (ProjectError) what the model would, before pushing anything: a command whose redo
    raised would be left on the stack."""

    def set_bends(self, edge, points, page: str | None = None, text: str = "Move reroute point") -> None:
        """Give ``edge`` its reroute points (``[]`` removes them), as one undo step; a no-op is
        none. Refuses (ProjectError) what the model refuses."""
        page = page or self.current_page
        pg = self.page(page)
        points = tuple(points)
        problem = bends_problem(points) or ("" if edge in pg.edges else f"page '{page}' has no wire {edge}")
        if problem:
            raise ProjectError(problem)
        points = tuple((float(x), float(y)) for x, y in points)
        if pg.bends.get(edge, ()) == points:
            return
        self.undo_stack.push(C.SetBendsCommand(self, page, edge, points, text))

    def add_frame(self, node_ids, title: str = "Frame", color: str = "blue", note: str = "",
                  page: str | None = None) -> int:
        """Frame the blocks ``node_ids`` (in page order); returns the new frame's index."""
        page = page or self.current_page
        pg = self.page(page)
        blocks = tuple(n for n in pg.nodes if n in set(node_ids))
        if not blocks:
            raise ProjectError("select the blocks to frame first")
        frame = Frame(title, color, note, blocks)
        problem = frame_problem(frame, pg.nodes) or (
            f"page '{page}' has {MAX_FRAMES} frames, the most it may have" if len(pg.frames) >= MAX_FRAMES else "")
        if problem:
            raise ProjectError(problem)
        self.undo_stack.push(C.InsertFrameCommand(self, page, frame))
        return len(pg.frames) - 1

    def edit_frame(self, index: int, page: str | None = None, **fields) -> None:
        """Change a frame's ``title``, ``color``, ``note`` or ``blocks``; a no-op is no undo step."""
        page = page or self.current_page
        frames = self.page(page).frames
        if not 0 <= index < len(frames):
            raise ProjectError(f"there is no frame {index}")
        if "blocks" in fields:
            fields["blocks"] = tuple(fields["blocks"])
        new = replace(frames[index], **fields)
        problem = frame_problem(new, self.page(page).nodes)
        if problem:
            raise ProjectError(problem)
        if new != frames[index]:
            self.undo_stack.push(C.SetFrameCommand(self, page, index, new))

    def remove_frame(self, index: int, page: str | None = None) -> None:
        """Delete a frame; its blocks stay."""
        page = page or self.current_page
        if not 0 <= index < len(self.page(page).frames):
            raise ProjectError(f"there is no frame {index}")
        self.undo_stack.push(C.RemoveFrameCommand(self, page, index))

    def move_frame(self, index: int, dx: float, dy: float, page: str | None = None) -> None:
        """Move a frame's blocks by (dx, dy), and the reroute points of the wires between them,
        as one undo step."""
        page = page or self.current_page
        pg = self.page(page)
        if not isinstance(index, int) or not 0 <= index < len(pg.frames):
            raise ProjectError(f"there is no frame {index}")
        blocks = set(pg.frames[index].blocks)
        if not blocks or (dx, dy) == (0, 0):
            return
        moves = {n: (pg.nodes[n].position, (pg.nodes[n].position[0] + dx, pg.nodes[n].position[1] + dy))
                 for n in pg.nodes if n in blocks}
        inner = [(e, [(x + dx, y + dy) for x, y in p]) for e, p in pg.bends.items()
                 if e.src in blocks and e.dst in blocks]
        for _, points in inner:            # refused before the macro: a command raising in it stays
            problem = bends_problem(points)
            if problem:
                raise ProjectError(f"moved that far, {problem}")
        self.undo_stack.beginMacro(f"Move frame {pg.frames[index].title}")
        self.undo_stack.push(C.MoveNodesCommand(self, page, moves))
        for edge, points in inner:
            self.undo_stack.push(C.SetBendsCommand(self, page, edge, points, "Move reroute points"))
        self.undo_stack.endMacro()
