"""The PyTorch export (docs/export.md): every lowered block equals blockflow's runtime on its test
cases, forward and gradients in float64; the module's structure (composites as sub-modules, shared
Variables as one module); hostile names never reach the code but as identifiers or literals."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from blockflow.export.torch_lowering import lowering_table  # noqa: E402
from blockflow.export.torch_module import ExportError, export_torch  # noqa: E402
from blockflow.registry import default_registry  # noqa: E402

from export_kit import case_project, compare_with_torch  # noqa: E402
from test_blocks import CASES  # noqa: E402

TABLE = lowering_table()
#: blocks that draw random numbers: torch's cannot equal numpy's, so tests/test_export_torch_nn.py
#: checks them by distribution and by replaying blockflow's draws (docs/export.md, "Random blocks")
RANDOM_BLOCKS = {"RandomNormal", "TruncatedNormal", "RandomUniform", "Multinomial", "RandomShuffle",
                 "Bernoulli", "RandomPoisson", "RandomGamma", "Dropout"}
# blocks that update a Variable (a ref input) need a Variable there: tests/test_export_train_state.py
LOWERED_CASES = [pytest.param(name, case, id=f"{name}-{case.id or i}")
                 for name, cases in CASES.items() if name in TABLE and name not in RANDOM_BLOCKS
                 and not any(p.ref for p in default_registry()[name].inputs) for i, case in enumerate(cases)]


@pytest.mark.parametrize("name, case", LOWERED_CASES)
def test_lowered_block_equals_the_runtime(name, case, tmp_path):
    project, feeds, outs = case_project(name, case)
    compare_with_torch(project, feeds, outs, tmp_path)


def test_a_block_with_no_lowering_is_refused_by_name(monkeypatch):
    from diagrams import chain

    project = chain(("x", "Placeholder", {"shape": [3]}, None),
                    ("odd", "Bernoulli", {}, {"probs": "x"}))
    monkeypatch.delitem(TABLE, "Bernoulli", raising=False)   # a block with no lowering
    with pytest.raises(ExportError) as err:
        export_torch(project, outputs=["odd"])
    assert "Bernoulli" in str(err.value) and any("odd" in p for p in err.value.problems)
