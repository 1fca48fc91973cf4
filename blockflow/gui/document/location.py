"""Where the editor is: which diagram it draws and edits, and whose run its values come from.

A page is drawn as itself. An instance opened on a page (``d1``, then ``d1/blk`` inside it) draws
its composite's diagram: edits go to the definition (every instance follows), and values,
types and gradients come from the host page's program at the instance's level (its flat id).
A definition opened on its own (from the palette) has no host: it is compiled by itself.

Qt-free: the document holds one, the breadcrumb draws its trail.
"""
from __future__ import annotations

from dataclasses import dataclass

from blockflow.composite import composite_name
from blockflow.errors import ProjectError
from blockflow.project import Project

__all__ = ["Location"]


@dataclass(frozen=True)
class Location:
    #: the diagram drawn and edited: a page's name, or ``@Name`` for a composite's diagram
    diagram: str
    #: the page whose program gives types, values and gradients (None: the definition alone)
    host: str | None
    #: the opened instance's flat id on the host page ("" for the page itself)
    level: str = ""

    @property
    def in_instance(self) -> bool:
        return bool(self.level)

    @property
    def program_page(self) -> str:
        """The page (or definition) whose program this location reads."""
        return self.host if self.host is not None else self.diagram

    def flat_id(self, node: str) -> str:
        """A node drawn here, as the host program names it."""
        return f"{self.level}/{node}" if self.level else node

    def opened(self, project: Project, node: str) -> "Location":
        """The location inside instance ``node`` drawn here."""
        block = project.page(self.diagram).nodes[node].block
        name = composite_name(block)
        if name is None:
            raise ProjectError(f"'{node}' is a {block}, not a composite's instance")
        project.composite(name)
        if self.host is None:
            # inside a definition opened alone there is no run: open the inner definition alone
            return Location(block, None)
        return Location(block, self.host, self.flat_id(node))

    def up(self, project: Project) -> "Location | None":
        """The location this one was opened from (None at a page or a definition alone)."""
        if not self.level:
            return None
        parent = self.level.rpartition("/")[0]
        return Location.at(project, self.host, parent)

    @staticmethod
    def at(project: Project, host: str, level: str) -> "Location":
        """The location of instance ``level`` (a flat id) on page ``host``."""
        diagram = host
        for part in level.split("/") if level else ():
            node = project.page(diagram).nodes.get(part)
            name = composite_name(node.block) if node is not None else None
            if name is None or name not in project.composites:
                raise ProjectError(f"page '{host}' has no instance '{level}'")
            diagram = "@" + name
        return Location(diagram, host, level)

    def trail(self, project: Project) -> list[tuple[str, "Location"]]:
        """The breadcrumb: (label, location) from the page down to here: ``main``,
        ``d1 (Dense)``, ``blk (Block)``."""
        if self.host is None:
            return [(f"{self.diagram[1:]} (definition)", self)]
        out = [(self.host, Location(self.host, self.host))]
        level = ""
        for part in self.level.split("/") if self.level else ():
            level = f"{level}/{part}" if level else part
            loc = Location.at(project, self.host, level)
            out.append((f"{part} ({loc.diagram[1:]})", loc))
        return out
