"""ONNX's backend node tests through the importer (docs/import.md, "ONNX's node tests").

Every node test case the onnx package generates whose model uses an op the importer maps (the
Constant op aside) is imported, run forward in blockflow and compared with the outputs the
package ships, at the case's own tolerances, as ONNX's backend test runner does. A case that does
not pass is listed in NOT_PASSING with why; the test fails for an unlisted failure and for a
listed case that passes (so the list stays true), and docs/import.md's table is checked to be
the one :func:`node_tests_markdown` writes. ``python tests/test_import_onnx_nodes.py`` prints the
outcome of every attempted case (``--markdown`` the doc's section).
"""
from __future__ import annotations

import functools
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import onnx.numpy_helper  # noqa: E402

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.importing.errors import ImportFailure, UnsupportedOps  # noqa: E402
from blockflow.importing.onnx_import import import_model  # noqa: E402
from blockflow.importing.onnx_mapping import mapping_table  # noqa: E402
from blockflow.importing.onnx_read import read_onnx_bytes  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "import.md"
SECTION = "## ONNX's node tests"


def _listed(*groups) -> dict:
    """{case: (outcome, reason)} from (outcome, reason, [cases]) groups (one reason, many cases)."""
    table = {}
    for outcome, reason, names in groups:
        for name in names:
            assert name not in table, f"{name} is listed twice"
            table[name] = (outcome, reason)
    return table


#: every attempted case that does not pass: outcome ("refused": the import raises UnsupportedOps;
#: "rejected": the reader refuses the file (a dtype a project does not hold); "differs": it runs
#: to other values; "error": it fails otherwise; "needs-block": waits for a block being added on
#: another branch) and why
NOT_PASSING = _listed(
)

OUTCOMES = ("refused", "rejected", "differs", "error", "needs-block")


@functools.lru_cache(maxsize=None)
def attempted_cases() -> dict:
    """{name: case} of the node test cases using an op the importer maps (collected once)."""
    from onnx.backend.test.case.node import collect_testcases
    table = mapping_table()
    cases = {}
    for case in collect_testcases(None):
        ops = {n.op_type for n in case.model.graph.node if n.domain in ("", "ai.onnx")} - {"Constant"}
        if ops & set(table):
            cases[case.name] = case
    return cases


def _close(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """Why ``got`` is not ``want`` (None when it is, as ONNX's runner compares)."""
    if got.dtype.kind != want.dtype.kind:
        return f"{name}: dtype {got.dtype} where {want.dtype} is expected"
    if got.shape != want.shape:
        return f"{name}: shape {list(got.shape)} where {list(want.shape)} is expected"
    if want.dtype.kind in "fc":
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = got != want
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        return f"{name}: {int(bad.sum())} of {want.size} values differ (at {list(i)}: {got[i]!r}, expected {want[i]!r})"
    return None


def _array(value) -> np.ndarray:
    """A data set's value as an array (some cases hold TensorProtos)."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


def refusal(exc: UnsupportedOps) -> str:
    """What the import refused, without node names: "Op: reason; ..." (the table's reason)."""
    return "; ".join(f"{op}: {reason}" for op, uses in sorted(exc.ops.items())
                     for reason in sorted({r for r, _ in uses}))


def outcome(case) -> tuple[str, str]:
    """("passed", "") or (outcome, what happened) for one case."""
    try:
        model = read_onnx_bytes(case.model.SerializeToString(), case.name)
    except ImportFailure as exc:
        return "rejected", str(exc)
    try:
        project, report = import_model(model, "case")
    except UnsupportedOps as exc:
        return "refused", refusal(exc)
    except ImportFailure as exc:   # a compile failure is the import's bug; anything else the file's
        return ("error" if "does not compile" in str(exc) else "rejected"), str(exc)
    except Exception as exc:  # noqa: BLE001 - any other failure is this case's outcome
        return "error", f"import: {type(exc).__name__}: {exc}"
    program = compile_project(project)
    initialized = {i.name for i in case.model.graph.initializer}
    names = [i.name for i in case.model.graph.input if i.name not in initialized]
    outs = [o.name for o in case.model.graph.output]
    for inputs, expected in case.data_sets:
        feeds = {report.inputs[n]: _array(v) for n, v in zip(names, inputs)}
        fetch = [report.outputs[n] for n in outs]
        try:
            result = run(program, feeds, fetch=fetch, record=False, check_numerics=False)
        except Exception as exc:  # noqa: BLE001
            return "error", f"run: {type(exc).__name__}: {exc}"
        for n, node, want in zip(outs, fetch, expected):
            why = _close(n, np.asarray(result.value(node)), _array(want), case.rtol, case.atol)
            if why:
                return "differs", why
    return "passed", ""


def counts() -> Counter:
    got = Counter(attempted=len(attempted_cases()))
    for name in attempted_cases():
        got[NOT_PASSING[name][0] if name in NOT_PASSING else "passed"] += 1
    return got


def node_tests_markdown() -> str:
    """docs/import.md's node-test section: the counts and the non-passing cases by reason."""
    c = counts()
    lines = [SECTION, "",
             f"The onnx package's backend node test cases (onnx {onnx.__version__}) whose model uses an "
             f"op the importer maps (`tests/test_import_onnx_nodes.py` runs them: import, run forward, "
             f"compare with the shipped outputs at the case's tolerances):", "",
             f"- attempted: {c['attempted']}", f"- passed: {c['passed']}"]
    lines += [f"- {o}: {c[o]}" for o in OUTCOMES if c[o]]
    by_reason: dict = {}
    for name, (o, reason) in NOT_PASSING.items():
        by_reason.setdefault((o, reason), []).append(name)
    lines += ["", "| outcome | why | cases |", "|---|---|---|"]
    for (o, reason), names in sorted(by_reason.items(), key=lambda kv: (OUTCOMES.index(kv[0][0]), kv[0][1])):
        shown = ", ".join(f"`{n}`" for n in sorted(names))
        lines.append(f"| {o} | {reason.replace('|', '/')} | {shown} |")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", sorted(attempted_cases()))
def test_node_case(name):
    got, why = outcome(attempted_cases()[name])
    listed = NOT_PASSING.get(name)
    if got == "passed":
        assert listed is None, f"{name} passes now: take it out of NOT_PASSING ({listed})"
    elif listed is None:
        pytest.fail(f"{name}: {got}: {why}")
    else:
        assert listed[0] in (got, "needs-block"), f"{name} is listed as {listed[0]} but is {got}: {why}"
        if got == "refused" and listed[0] == "refused":
            assert listed[1] == why, f"{name} is refused for another reason now: {why}"


def test_listed_cases_are_attempted():
    assert set(NOT_PASSING) <= set(attempted_cases()), sorted(set(NOT_PASSING) - set(attempted_cases()))
    assert all(o in OUTCOMES and reason for o, reason in NOT_PASSING.values())


def test_doc_section_is_current():
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    nxt = re.search(r"^## ", text[start + len(SECTION):], re.M)
    section = text[start:start + len(SECTION) + nxt.start()] if nxt else text[start:]
    assert section.rstrip("\n") + "\n" == node_tests_markdown(), \
        "docs/import.md's node tests section is stale: python tests/test_import_onnx_nodes.py --markdown"


if __name__ == "__main__":
    if "--markdown" in sys.argv:
        print(node_tests_markdown(), end="")
    else:
        for case_name, case in sorted(attempted_cases().items()):
            o, what = outcome(case)
            print(f"{case_name}\t{o}\t{' '.join(what.split())[:400]}")
