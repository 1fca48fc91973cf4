"""Data files read by dataset blocks inside composites, when ``train --save`` puts the project in
another folder: before, only the pages' dataset blocks were looked at, so the file was neither
copied nor its path rewritten (the saved project named a file that was not there, and said
nothing), and ``--save`` over that very file was not refused. A composite whose dataset takes its
path from a parameter is followed to its instances' values, or the parameter's default."""
from __future__ import annotations

import pytest

from blockflow.cli.entry import main
from blockflow.composite import Composite, block_name
from blockflow.io.project_io import load_project, save_project
from blockflow.project import Project
from blockflow.spec import Attr

TABLE = "a,b,label\n1,2,0\n3,4,1\n5,6,1\n"


def _project(folder, by_param: str = ""):
    """Composite Src (a CsvDataset; its path literal, or Src's parameter ``file``), inside
    composite Outer when ``by_param`` (Outer passing its own ``file`` on, which the page's
    instance gives, or leaves to its default when ``by_param`` is "default"); a page training one
    Variable on its features."""
    default = "data/d.csv" if by_param == "default" else ""
    src = Composite("Src", params=[Attr("file", "str", "")] if by_param else [])
    src.page.add_node("CsvDataset", id="ds", attrs={"path": {"$param": "file"} if by_param else "data/d.csv",
                                                    "label": "label", "test_fraction": 0.0})
    src.page.add_node("Output", id="y", attrs={"name": "y"})
    src.page.connect("ds", "features", "y", "input")
    project = Project()
    project.composites["Src"] = src
    top = "Src"
    if by_param:
        outer = Composite("Outer", params=[Attr("file", "str", default)])
        outer.page.add_node(block_name("Src"), id="s", attrs={"file": {"$param": "file"}})
        outer.page.add_node("Output", id="y", attrs={"name": "y"})
        outer.page.connect("s", "y", "y", "input")
        project.composites["Outer"] = outer
        top = "Outer"
    page = project.add_page("main")
    page.add_node(block_name(top), id="s", attrs={"file": "data/d.csv"} if by_param and not default else {})
    page.add_node("Variable", id="w", attrs={"shape": [2, 1], "dtype": "float32", "initializer": "ones"})
    page.add_node("MatMul", id="mm")
    page.add_node("Mean", id="loss")
    page.connect("s", "y", "mm", "a")
    page.connect("w", "ref", "mm", "b")
    page.connect("mm", "product", "loss", "input")
    page.loss = "loss"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "d.csv").write_text(TABLE)
    save_project(project, folder / "p.bflow.json", backup=False)
    return folder / "p.bflow.json"


def _given(path, by_param: str) -> str:
    """The data path a saved project gives its dataset: the block's own, or the page's instance's."""
    project = load_project(path)
    if by_param:
        return project.pages[0].nodes["s"].attrs["file"]
    return project.composites["Src"].page.nodes["ds"].attrs["path"]


@pytest.mark.parametrize("by_param", ["", "instance", "default"], ids=["literal", "parameter", "default"])
def test_train_save_elsewhere_copies_a_composites_data_file(tmp_path, capsys, by_param):
    src = _project(tmp_path / "src", by_param)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["train", str(src), "--steps", "2", "-q", "--save", str(out / "p.bflow.json")]) == 0
    assert f"copied data file 'data/d.csv' into {out}" in capsys.readouterr().out
    assert (out / "data" / "d.csv").read_text() == TABLE
    assert main(["run", str(out / "p.bflow.json"), "--fetch", "loss"]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("by_param", ["", "instance", "default"], ids=["literal", "parameter", "default"])
def test_train_save_into_an_enclosing_folder_rewrites_a_composites_data_path(tmp_path, capsys, by_param):
    src = _project(tmp_path / "src", by_param)
    before = src.read_bytes()
    assert main(["train", str(src), "--steps", "2", "-q", "--save", str(tmp_path / "p.bflow.json")]) == 0
    assert "data file 'data/d.csv' is named 'src/data/d.csv' in the saved project" in capsys.readouterr().out
    assert _given(tmp_path / "p.bflow.json", by_param) == "src/data/d.csv"
    assert not (tmp_path / "data").exists()
    assert main(["run", str(tmp_path / "p.bflow.json"), "--fetch", "loss"]) == 0, capsys.readouterr().err
    assert src.read_bytes() == before          # the project trained is left as it was


def test_train_save_over_a_composites_data_file_is_refused(tmp_path, capsys):
    src = _project(tmp_path / "src")
    data = tmp_path / "src" / "data" / "d.csv"
    assert main(["train", str(src), "--steps", "2", "-q", "--save", str(data)]) == 2
    assert "it is the data file 'data/d.csv' the project reads" in capsys.readouterr().err
    assert data.read_text() == TABLE
