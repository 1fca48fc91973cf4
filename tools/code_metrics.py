"""The figures docs/architecture.md asks to keep an eye on, measured on the working tree.

    python tools/code_metrics.py [--top N]

Prints the modules of blockflow/ and blocks/ over 600 lines, the longest functions (a nested
function counts inside its parent too), and how many slots are connected to each signal of the
editor's Document once a main window is open on it (counted live, offscreen, with Qt's own
``receivers``: a connection made in a loop or through a table counts too).
"""
from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_LIMIT, FUNCTION_LIMIT = 600, 60


def python_files():
    return sorted(p for folder in ("blockflow", "blocks") for p in (ROOT / folder).rglob("*.py")
                  if "__pycache__" not in p.parts)


def function_lengths(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.end_lineno - node.lineno + 1, f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"


def document_signals() -> list[str]:
    source = (ROOT / "blockflow/gui/document/document.py").read_text(encoding="utf-8")
    return re.findall(r"^\s+(\w+) = Signal\(", source, flags=re.M)


def main(argv=None) -> None:
    args = _parse(argv)
    files = python_files()
    sizes = sorted(((p.read_text(encoding="utf-8").count("\n"), str(p.relative_to(ROOT))) for p in files),
                   reverse=True)
    print(f"{len(files)} modules, {sum(n for n, _ in sizes)} lines")
    print(f"modules over {MODULE_LIMIT} lines:", sum(n > MODULE_LIMIT for n, _ in sizes))
    for n, name in sizes:
        if n > MODULE_LIMIT:
            print(f"  {n:5d} {name}")
    functions = sorted((f for p in files for f in function_lengths(p)), reverse=True)
    print(f"functions over {FUNCTION_LIMIT} lines:", sum(n > FUNCTION_LIMIT for n, _ in functions))
    for n, name in functions[:args.top]:
        print(f"  {n:5d} {name}")
    counts = live_connections()
    print("connections to the document's signals, main window open:", sum(counts.values()))
    print("  " + ", ".join(f"{s} {n}" for s, n in counts.items()))


def live_connections() -> dict[str, int]:
    """Signal name -> number of receivers, on a Document a MainWindow was opened on."""
    import os
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication
    from blockflow.gui.document.document import Document
    from blockflow.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    document = Document()
    window = MainWindow(document)
    meta = document.metaObject()
    counts = {}
    for i in range(meta.methodCount()):
        method = meta.method(i)
        name = bytes(method.name()).decode()
        if name in document_signals():
            counts[name] = document.receivers("2" + bytes(method.methodSignature()).decode())
    window.close()
    del app
    return counts


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15, help="how many of the longest functions to list")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
