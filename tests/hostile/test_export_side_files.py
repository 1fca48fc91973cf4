"""Hostile suite, export: the files an export writes beside the one named (``NAME.pt``,
``NAME_data.pt``, ``train.py``) are blockflow's own. A file of the user's at one of those names
(their own training script, a trained checkpoint) stops the export before anything is written;
blockflow's own earlier export there is replaced, as a link is (never written through)."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from blockflow.cli import main  # noqa: E402
from blockflow.export.formats import export_files  # noqa: E402
from blockflow.io.project_io import load_project  # noqa: E402

MOONS = Path(__file__).resolve().parents[2] / "sample_projects" / "moons_classifier.bflow.json"
USERS = b"# the user's own file\n"


def _export(out: Path, *train) -> int:
    return main(["export", "torch", str(MOONS), "-o", str(out / "model.py"), *train])


@pytest.mark.parametrize("name", ["model.pt", "model_data.pt", "train.py"])
def test_a_file_of_the_users_beside_the_module_stops_the_export_untouched(tmp_path, capsys, name):
    (tmp_path / name).write_bytes(USERS)
    assert _export(tmp_path, "--train") == 3
    err = capsys.readouterr().err
    assert str(tmp_path / name) in err and "blockflow did not write" in err and "nothing was written" in err
    assert (tmp_path / name).read_bytes() == USERS
    assert [p.name for p in tmp_path.iterdir()] == [name]      # nothing half exported


def test_the_editors_export_refuses_it_as_a_file_error(tmp_path):
    (tmp_path / "model.pt").write_bytes(USERS)
    with pytest.raises(OSError, match="model.pt is a file blockflow did not write"):
        export_files("torch", load_project(MOONS), None, tmp_path / "model.py")
    assert (tmp_path / "model.pt").read_bytes() == USERS
    assert not (tmp_path / "model.py").exists()


def test_blockflows_own_earlier_export_is_replaced_and_an_edited_one_is_kept(tmp_path, capsys):
    assert _export(tmp_path, "--train") == 0
    assert _export(tmp_path, "--train") == 0        # its own files: exported again in place
    assert _export(tmp_path) == 0
    script = tmp_path / "train.py"
    script.write_text(script.read_text(encoding="utf-8") + "# my change\n", encoding="utf-8")
    capsys.readouterr()
    assert _export(tmp_path, "--train") == 3        # edited since: the user's now
    assert "train.py is a file blockflow did not write" in capsys.readouterr().err
    assert script.read_text(encoding="utf-8").endswith("# my change\n")
