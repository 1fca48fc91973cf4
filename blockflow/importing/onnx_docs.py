"""The op table of docs/import.md, made from the mapping table so it cannot go stale
(tests/test_import_onnx_docs.py compares it with the committed page).

``python -m blockflow.importing.onnx_docs docs/import.md`` rewrites it."""
from __future__ import annotations

from blockflow.importing.onnx_fold import FOLDERS
from blockflow.importing.onnx_mapping import mapping_table

__all__ = ["ops_markdown", "updated_doc", "BEGIN", "END"]

BEGIN = "<!-- onnx-import-ops: begin (made by blockflow.importing.onnx_docs.ops_markdown) -->"
END = "<!-- onnx-import-ops: end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or " "


def ops_markdown() -> str:
    """The table of ONNX ops the import maps (op, blocks, what is exact and what is refused), and
    the ops it only folds when their inputs are constants."""
    table = mapping_table()
    folded_only = sorted(op for op in FOLDERS if op not in table)
    lines = [BEGIN, "", f"**{len(table)} ONNX ops are mapped**; {len(folded_only)} more are computed "
             "while importing when all their inputs are known (constant folding): "
             + ", ".join(f"`{op}`" for op in folded_only) + ".", "",
             "| ONNX op | blocks | notes |", "|---|---|---|"]
    for op in sorted(table):
        m = table[op]
        lines.append(f"| `{op}` | {_cell(m.blocks)} | {_cell(m.notes)} |")
    lines += ["", END]
    return "\n".join(lines) + "\n"


def updated_doc(text: str) -> str:
    """``text`` (docs/import.md) with its op table replaced by the current one."""
    head, found, rest = text.partition(BEGIN)
    if not found or END not in rest:
        raise ValueError("docs/import.md has no op table (the onnx-import-ops markers)")
    return head + ops_markdown().rstrip("\n") + rest.partition(END)[2]


if __name__ == "__main__":   # python -m blockflow.importing.onnx_docs docs/import.md
    import sys
    from pathlib import Path

    target = Path(sys.argv[1])
    target.write_text(updated_doc(target.read_text(encoding="utf-8")), encoding="utf-8")
