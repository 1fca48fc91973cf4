"""The Document's edits of composites and of where the editor is (a mixin of Document, kept
apart so that document.py stays readable): add, delete, rename and replace definitions, group
and ungroup, open an instance, go up, open a definition on its own. Each edit is one undo step
whose redo and undo are one mutator each (blockflow.composite's, compile.grouping.restructure).
"""
from __future__ import annotations

from blockflow.compile.grouping import plan_group, plan_ungroup, suggest_name
from blockflow.composite import (Composite, block_name, composite_name, composite_name_problem,
                                 composites_problem, cycle_through, insert_composite, insert_composites,
                                 instances_of, remove_composite, rename_composite, replace_composite)
from blockflow.errors import ProjectError
from blockflow.project import Node, Page
from blockflow.gui.document import commands as C
from blockflow.gui.document.compiling import users_of
from blockflow.gui.document.location import Location

__all__ = ["CompositeEdits"]


class CompositeEdits:
    """Composite edits and navigation; mixed into Document (uses its project, undo stack,
    location and programs)."""

    # ------------------------------------------------------------------ composites
    def nesting_problem(self, block: str, page: str | None = None) -> str:
        """Why an instance of ``block`` cannot go on ``page`` ("" when it can): a definition
        may not contain itself, directly or not (the cycle is named)."""
        name, host = composite_name(block), composite_name(page or self.current_page)
        if name is None or host is None:
            return ""
        if name == host:
            return f"composite '{host}' cannot contain itself: {host} > {host}"
        trial = dict(self.project.composites)
        own = self.project.composite(host)
        extra = Page(own.page.name, {**own.page.nodes, "__trial__": Node("__trial__", block)})
        trial[host] = Composite(host, own.doc, own.params, extra)
        cycle = cycle_through(trial, host)
        return f"composite '{host}' would contain itself: {' > '.join(cycle)}" if cycle else ""

    def instance_count(self, name: str) -> int:
        return sum(1 for _ in instances_of(self.project, name))

    def instance_counts(self) -> dict:
        """``{composite: how many instances}`` for every composite, in one pass over the
        diagrams (instance_count per composite is a pass each: 10,000 composites took minutes)."""
        counts = dict.fromkeys(self.project.composites, 0)
        for page in self.project.diagrams():
            for node in page.nodes.values():
                name = node.block[1:] if node.block.startswith("@") else None
                if name in counts:
                    counts[name] += 1
        return counts

    def add_composite(self, composite: Composite) -> None:
        self.undo_stack.push(C.ProjectEditCommand(self, f"Add composite {composite.name}", insert_composite,
                                                  (composite,), C.undo_insert_composite))

    def add_composites(self, composites: list, text: str) -> None:
        """Add many definitions as one edit (an import): see blockflow.composite.insert_composites.
        Refused (ProjectError) before anything is added when one cannot be."""
        self._refuse(composites_problem(self.project, composites))
        self.undo_stack.push(C.ProjectEditCommand(self, text, insert_composites, (list(composites),),
                                                  C.undo_insert_composites))

    def remove_composite(self, name: str) -> None:
        """Delete a composite no instance uses (refused, naming the instances, otherwise)."""
        comp = self.project.composite(name)
        users = [f"{d}/{n}" for d, n in instances_of(self.project, name) if d != comp.block]
        if users:
            more = f" and {len(users) - 3} more" if len(users) > 3 else ""
            raise ProjectError(f"composite '{name}' is used by {', '.join(users[:3])}{more}; "
                               f"ungroup or delete those first")
        self.undo_stack.push(C.ProjectEditCommand(self, f"Delete composite {name}", remove_composite,
                                                  (name,), C.undo_remove_composite))

    def rename_composite(self, old: str, new: str) -> None:
        if old == new:
            return
        self.project.composite(old)
        if new in self.project.composites:
            raise ProjectError(f"there is already a composite named '{new}'")
        problem = composite_name_problem(new)
        if problem:
            raise ProjectError(problem)
        self.undo_stack.push(C.ProjectEditCommand(self, f"Rename composite {old} to {new}", rename_composite,
                                                  (old, new), C.undo_rename_composite))

    def replace_composite(self, composite: Composite, text: str = "") -> None:
        """Put ``composite`` in place of the definition of the same name (one undo step)."""
        self.project.composite(composite.name)
        self._refuse(composites_problem(self.project, [], [composite]))     # (a cycle: before the push)
        self.undo_stack.push(C.ProjectEditCommand(self, text or f"Edit composite {composite.name}",
                                                  replace_composite, (composite,), C.undo_replace_composite))

    def group(self, node_ids, name: str | None = None, page: str | None = None) -> str:
        """Make the blocks ``node_ids`` a new composite ``name`` and one instance in their place
        (one undo step); returns the instance's id."""
        page = page or self.current_page
        name = name or suggest_name(self.project)
        program, level = self._program_at(page)
        plan = plan_group(self.project, page, node_ids, name, program, level, self.registry)
        self.undo_stack.push(C.RestructureCommand(self, f"Group {len(plan.content.nodes)} blocks as {name}", plan))
        return plan.focus

    def ungroup(self, node_id: str, page: str | None = None) -> list[str]:
        """Inline instance ``node_id`` back (one undo step); returns the ids of its blocks."""
        page = page or self.current_page
        program, level = self._program_at(page)
        before = set(self.page(page).nodes)
        plan = plan_ungroup(self.project, page, node_id, program, level, self.registry)
        self.undo_stack.push(C.RestructureCommand(self, f"Ungroup {node_id}", plan))
        return [n for n in self.page(page).nodes if n not in before]

    def _program_at(self, page: str):
        """The program whose types a group or ungroup on ``page`` reads, and the level drawn."""
        loc = self.location
        if loc.diagram == page and loc.host is not None and loc.level:
            try:
                return self.program(loc.host), loc.level
            except ProjectError:
                return None, ""
        try:
            return self.program(page), ""
        except ProjectError:
            return None, ""

    # ------------------------------------------------------------------ telling the views
    def _announce_composites(self, change) -> None:
        """After Document.apply: what a change of composites means for the views."""
        if "definition" in change.fields:
            self._programs.pages_changed()           # the definition's diagram is another Page
            if self.current_page == change.page:
                self.current_page_changed.emit(change.page)
        if change.page_renamed and change.page_renamed[1].startswith("@"):
            # a composite renamed: its instances' block names changed with it
            for diagram, nid in list(instances_of(self.project, change.page_renamed[1][1:])):
                self.node_changed.emit(diagram, nid)
        if any(n.startswith("@") for n in (change.pages_added + change.pages_removed + change.page_renamed)) \
                or "definition" in change.fields:
            self.composites_changed.emit()

    def _definitions_edited(self, pages) -> None:
        """Definitions' edits change every diagram that uses one of them, directly or not (found
        in one walk for them all), also when they went (an import undone: instances of them are
        unknown blocks again); when one changed its composite's ports, its instances are drawn
        again."""
        names = [n for n in map(composite_name, pages) if n is not None]
        if not names:
            return
        for user in users_of(self.project, *names):
            self._programs.changed(user)
            self.structure_changed.emit(user)
        for name in (n for n in names if n in self.project.composites):
            spec = self.blocks.get(block_name(name))
            if self._port_specs.get(name, spec) is not spec:
                for diagram, nid in list(instances_of(self.project, name)):
                    self.node_changed.emit(diagram, nid)
            self._port_specs[name] = spec

    # ------------------------------------------------------------------ where the editor is
    def open_instance(self, node_id: str) -> None:
        """Show the inside of instance ``node_id`` of the current diagram."""
        self.set_location(self.location.opened(self.project, node_id))

    def go_up(self) -> bool:
        """Close the innermost instance opened (False at a page or a definition alone)."""
        up = self.location.up(self.project)
        if up is None:
            return False
        self.set_location(up)
        return True

    def open_definition(self, name: str) -> None:
        """Show composite ``name``'s definition on its own (no host page: compiled alone)."""
        comp = self.project.composite(name)
        self.set_location(Location(comp.block, None))

    def host_page(self) -> str:
        """The page whose tab is current: the host of the instance shown, else the last page."""
        loc = self.location
        if loc.host is not None:
            return loc.host
        return self._last_page if self._last_page in {p.name for p in self.project.pages} \
            else self.project.pages[0].name

