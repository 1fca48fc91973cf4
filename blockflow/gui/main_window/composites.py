"""The window's side of composites: the palette's Composites section kept in step with the
project, its context menu (edit the definition, rename, delete, export), and File > Export
Composites… / Import Composites… (library files, blockflow.io.project_io's save_library and
load_library). A mixin of MainWindow; every edit goes through the Document, one undo step each."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QCheckBox, QFileDialog, QInputDialog, QMessageBox

from blockflow.composite import block_name, composite_name, composites_problem, uses
from blockflow.errors import ProjectError, ProjectFileError
from blockflow.io.project_io import load_library, save_library
from blockflow.gui.common.refresh import Debounced
from blockflow.gui.main_window.files import PROJECT_FILTER, PROJECT_SUFFIX

__all__ = ["CompositesMixin", "with_dependencies", "renamed_imports"]

#: what a name clash on import may become
REPLACE, KEEP_BOTH, SKIP = "replace", "keep both", "skip"


def with_dependencies(composites: dict, names) -> dict:
    """``names`` and every composite they use, directly or not, in the project's order."""
    wanted, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in wanted or name not in composites:
            continue
        wanted.add(name)
        todo.extend(uses(composites[name]))
    return {n: c for n, c in composites.items() if n in wanted}


def renamed_imports(imported: dict, renames: dict) -> dict:
    """The imported composites with ``renames`` ({old: new}) applied to their names and to the
    instances inside any of them, so that they keep using each other."""
    out = {}
    for name, comp in imported.items():
        comp = comp.copy()
        new = renames.get(name, name)
        comp.name = new
        comp.page.name = block_name(new)
        for node in comp.page.nodes.values():
            inner = composite_name(node.block)
            if inner in renames:
                node.block = block_name(renames[inner])
        out[new] = comp
    return out


def _listed(names: list, most: int = 8) -> str:
    """``names`` for a message: the first ``most``, then how many more (an import of 10,000)."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most:,} more"


def _free_name(taken, name: str) -> str:
    n = 2
    while f"{name}_{n}" in taken:
        n += 1
    return f"{name}_{n}"


class CompositesMixin:
    """Composites in the window (see the module)."""

    def _bind_composites(self) -> None:
        doc = self.document
        self._composites_refresh = Debounced(self, self.sync_composites)
        self._composites_refresh.follow(doc.composites_changed, doc.project_replaced, doc.node_added,
                                        doc.node_removed, doc.pages_changed)
        self.palette_panel.composite_action.connect(self.composite_action)
        self.sync_composites()

    def sync_composites(self) -> None:
        """The palette lists the project's composites (name, documentation, how often used)."""
        doc = self.document
        counts = doc.instance_counts()
        self.palette_panel.set_composites([(name, comp.doc, counts[name])
                                           for name, comp in doc.project.composites.items()])

    def _refused(self, what: str, exc: Exception) -> None:
        self.statusBar().showMessage(f"{what}: {exc}", 10000)
        QMessageBox.warning(self, what, str(exc))

    def composite_action(self, key: str, name: str) -> None:
        """A composite row's context menu: edit, rename, delete or export ``name``."""
        doc = self.document
        try:
            if key == "edit":
                doc.open_definition(name)
                self.statusBar().showMessage(f"editing the definition of {name} on its own (no run: "
                                             f"its parameters' defaults); every instance follows", 8000)
            elif key == "rename":
                new, ok = QInputDialog.getText(self, "Rename composite", f"New name of {name}:", text=name)
                if ok:
                    doc.rename_composite(name, new.strip())
            elif key == "delete":
                doc.remove_composite(name)
                self.statusBar().showMessage(f"deleted composite {name}", 6000)
            elif key == "export":
                self.export_composites([name])
        except ProjectError as exc:
            self._refused(f"Cannot {key} composite {name}", exc)

    # ------------------------------------------------------------------ library files
    def export_composites(self, names=None, path: str | None = None) -> str | None:
        """Write composites ``names`` (all when None) and those they use to a library file."""
        comps = self.document.project.composites
        if not comps:
            self.statusBar().showMessage("this project has no composites to export: select blocks "
                                         "and Group (Ctrl+G) to make one", 8000)
            return None
        chosen = with_dependencies(comps, names if names is not None else list(comps))
        if path is None:
            stem = names[0] if names and len(names) == 1 else "composites"
            suggested = str(Path(self._dialog_dir()) / f"{stem}{PROJECT_SUFFIX}")
            path, _ = QFileDialog.getSaveFileName(self, "Export composites to a library file", suggested,
                                                  PROJECT_FILTER)
            if not path:
                return None
        try:
            save_library(path, chosen, {"title": Path(path).name})
        except (ProjectError, OSError) as exc:
            self._refused("Cannot export composites", exc)
            return None
        self.statusBar().showMessage(f"exported {', '.join(chosen)} to {path}", 8000)
        return path

    def ask_clash(self, name: str, later: int = 0) -> tuple[str, bool]:
        """What to do with an imported composite whose name is taken by a different one, and
        whether to do the same for the ``later`` clashes after it (a check box, offered when
        there are any: a library of hundreds of clashing composites asks once, not hundreds of
        times)."""
        box = QMessageBox(QMessageBox.Question, "Import composites",
                          f"This project already has a different composite named '{name}'.", parent=self)
        buttons = {box.addButton("Replace", QMessageBox.AcceptRole): REPLACE,
                   box.addButton("Keep Both", QMessageBox.ActionRole): KEEP_BOTH,
                   box.addButton("Skip", QMessageBox.RejectRole): SKIP}
        box.setInformativeText("Replace changes every instance of it; Keep Both imports it "
                               f"as '{_free_name(self.document.project.composites, name)}'.")
        # (held here: the box does not take it from Python, which would delete it at once)
        same = QCheckBox(f"Do the same for the {later:,} other name clash{'es' if later != 1 else ''} "
                         "of this import", box) if later else None
        if same is not None:
            box.setCheckBox(same)
        box.exec()
        return buttons.get(box.clickedButton(), SKIP), bool(same is not None and same.isChecked())

    def import_composites(self, path: str | None = None) -> list[str]:
        """Read a library file's composites into the project (one undo step); a name taken by a
        different composite asks: Replace / Keep both (renamed) / Skip. Returns the names added
        or replaced."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Import composites from a library file",
                                                  self._dialog_dir(), PROJECT_FILTER)
            if not path:
                return []
        try:
            imported, _meta = load_library(path)
        except (ProjectError, ProjectFileError, OSError) as exc:
            self._refused("Cannot import composites", exc)
            return []
        have = self.document.project.composites
        renames, replace = {}, set()
        # the very same definition under the same name: nothing to do
        skip = {name for name, comp in imported.items() if name in have and have[name] == comp}
        clashes = [name for name in imported if name in have and name not in skip]
        taken = set(have) | set(imported)       # (one set, grown: not one per clash)
        for_all = None
        for i, name in enumerate(clashes):
            choice = for_all
            if choice is None:
                choice, same_for_all = self.ask_clash(name, len(clashes) - i - 1)
                for_all = choice if same_for_all else None
            if choice == REPLACE:
                replace.add(name)
            elif choice == KEEP_BOTH:
                renames[name] = _free_name(taken, name)
                taken.add(renames[name])
            else:
                skip.add(name)
        comps = renamed_imports({n: c for n, c in imported.items() if n not in skip}, renames)
        return self._take_imports(comps, replace, path)

    def _take_imports(self, comps: dict, replace: set, path: str) -> list[str]:
        """Add the new composites of an import as one edit (insert_composites: one pass for them
        all, where one edit each cost a pass over the project each), then replace the others."""
        doc = self.document
        if not comps:
            self.statusBar().showMessage(f"nothing new to import from {path}", 6000)
            return []
        stack = doc.undo_stack
        text = f"Import {len(comps)} composite{'s' if len(comps) != 1 else ''}"
        new = [comp for name, comp in comps.items() if name not in replace]
        replacing = [comp for name, comp in comps.items() if name in replace]
        problem = composites_problem(doc.project, new, replacing)
        if problem:               # refused before anything is made: an import is all or nothing
            self._refused("Cannot import composites", ProjectError(problem))
            return []
        stack.beginMacro(text)
        try:
            if new:
                doc.add_composites(new, text)
            for comp in replacing:     # one by one, each may be refused on its own (a cycle on the way)
                doc.replace_composite(comp, f"Replace composite {comp.name}")
        except ProjectError as exc:
            stack.endMacro()
            stack.undo()          # the part already made goes: an import is all or nothing
            self._refused("Cannot import composites", exc)
            return []
        stack.endMacro()
        self.statusBar().showMessage(f"imported {_listed(list(comps))} from {Path(path).name}", 8000)
        return list(comps)


