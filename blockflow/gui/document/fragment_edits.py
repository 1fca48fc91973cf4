"""The Document's copy, paste, duplicate and layout (a mixin of Document, kept apart so that
document.py stays readable): each is one undo step of ordinary commands.
"""
from __future__ import annotations

from blockflow.page_blocks import Blocks
from blockflow.page_layout import bends_problem
from blockflow.gui.document import commands as C
from blockflow.gui.document.clipboard import fragment_text, pasting
from blockflow.gui.document.layout import layered_moves, spread_moves

__all__ = ["FragmentEdits"]


class FragmentEdits:
    """Fragments and layouts; mixed into Document (uses its pages, undo stack, move_nodes and
    refusals)."""

    def copy_fragment(self, node_ids, page: str | None = None) -> str:
        """The selected nodes and the wires between them, as project JSON (for the clipboard)."""
        return fragment_text(self.page(page), node_ids)

    def paste_fragment(self, text: str, position=None, page: str | None = None) -> list[str]:
        """Paste a copied fragment (new ids, internal wires kept), its top-left at ``position``.
        One undo step; returns the new node ids."""
        page = page or self.current_page
        landing = pasting(self.page(page), text, position)
        if not landing.nodes:
            return []
        for node in landing.nodes:     # an instance pasted into its own definition: refused
            self._refuse(self.nesting_problem(node.block, page))
        for points in landing.bends.values():   # reroute points moved out of range: refused before the edit
            self._refuse(bends_problem(points))
        count = len(landing.nodes)
        blocks = Blocks.appended(self.page(page), landing.nodes, landing.edges, landing.feeds, landing.bends)
        self._refuse(self.page(page).blocks_problem(blocks))     # (a wire twice in the fragment)
        self.undo_stack.push(C.InsertBlocksCommand(self, page, blocks,
                                                   f"Paste {count} block{'s' if count != 1 else ''}"))
        return [node.id for node in landing.nodes]

    def duplicate(self, node_ids, page: str | None = None) -> list[str]:
        return self.paste_fragment(self.copy_fragment(node_ids, page), None, page)

    def auto_layout(self, page: str | None = None, node_ids=None, spacing=(220.0, 110.0)) -> None:
        """Layered layout from the graph (networkx topological generations), as one undo step."""
        page = page or self.current_page
        pg = self.page(page)
        ids = list(pg.nodes) if node_ids is None else [n for n in pg.nodes if n in set(node_ids)]
        moves = layered_moves(pg, ids, spacing)
        self.undo_stack.beginMacro("Auto-layout")
        self.move_nodes(moves, page)
        self.undo_stack.endMacro()

    def spread_stacked(self, page: str | None = None, spacing=(220.0, 110.0)) -> list[str]:
        """Lay the stacked blocks of a page out in layers (layout.spread_moves), below the
        page's other blocks, as one undo step. Returns the blocks moved."""
        page = page or self.current_page
        moves = spread_moves(self.page(page), spacing)
        if not moves:
            return []
        self.undo_stack.beginMacro(f"Lay out {len(moves)} stacked blocks")
        self.move_nodes(moves, page)
        self.undo_stack.endMacro()
        return list(moves)
