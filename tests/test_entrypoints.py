"""blockflow.entrypoints reads what importlib.metadata.entry_points(group=...) gives, without
importing it (start-up time, docs/performance.md): compared on the installed packages and on
crafted folders, with the cases only importlib reads handed to it."""
from __future__ import annotations

import os
import sys
import zipfile
from importlib import metadata

import pytest

from blockflow import entrypoints
from blockflow.entrypoints import EntryPoint

GROUPS = ("blockflow.blocks", "blockflow.layers", "console_scripts", "pytest11", "demo")


def _stdlib(group):
    return [EntryPoint(ep.name, ep.value, ep.group) for ep in metadata.entry_points(group=group)]


def _dist(folder, entry, text=None):
    path = folder / entry
    path.mkdir(parents=True)
    if text is not None:
        (path / "entry_points.txt").write_text(text, encoding="utf-8")


@pytest.mark.parametrize("group", GROUPS)
def test_the_installed_packages_entry_points_are_the_standard_librarys(group):
    assert entrypoints._scanned(group) == _stdlib(group)


def test_crafted_folders_read_as_the_standard_library_reads_them(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    _dist(a, "My.Plugin-1.0.dist-info", "# a comment\n\n[demo]\n  one =  pkg.mod:make  \n"
                                        "two=pkg:obj.attr [extra]\n[other]\nx = y:z\n")
    _dist(a, "zeta-1.0.dist-info")                                   # no entry points
    _dist(a, "alpha-2.dist-info", "[demo]\nthree = alpha\n")
    _dist(b, "my_plugin-2.0.dist-info", "[demo]\nhidden = by:the_first\n")   # same name: hidden
    _dist(b, "old-0.1.egg-info", "[demo]\nfour = old.plugin:main\n")
    (b / "single.egg-info").write_text("Metadata-Version: 1.0\nName: single\n")   # a file
    (b / "not-a-dist.txt").write_text("[demo]\nfive = no:no\n")
    monkeypatch.setattr(sys, "path", [str(a), str(tmp_path / "missing"), str(b)])
    found = entrypoints.entry_points("demo")
    assert found == _stdlib("demo") == entrypoints._scanned("demo")
    assert {ep.name for ep in found} == {"one", "two", "three", "four"}
    assert [ep.value for ep in found if ep.name == "two"] == ["pkg:obj.attr [extra]"]


def test_a_zip_archive_on_the_path_is_read_by_the_standard_library(tmp_path, monkeypatch):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped-1.0.dist-info/entry_points.txt", "[demo]\nzipped = zipped:main\n")
        z.writestr("zipped-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 1.0\n")
    monkeypatch.setattr(sys, "path", [str(archive)])
    with pytest.raises(entrypoints._Unusual):
        entrypoints._scanned("demo")
    assert entrypoints.entry_points("demo") == _stdlib("demo") == [EntryPoint("zipped", "zipped:main", "demo")]


def test_a_name_importlib_would_read_from_metadata_is_left_to_it(tmp_path, monkeypatch):
    _dist(tmp_path, "Shouty-1.0.DIST-INFO", "[demo]\nloud = shouty:main\n")
    (tmp_path / "Shouty-1.0.DIST-INFO" / "METADATA").write_text("Metadata-Version: 2.1\nName: shouty\nVersion: 1.0\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    with pytest.raises(entrypoints._Unusual):
        entrypoints._scanned("demo")
    assert entrypoints.entry_points("demo") == _stdlib("demo")


def test_another_finder_listing_distributions_is_asked_through_the_standard_library(monkeypatch):
    class Finder:
        @staticmethod
        def find_distributions(context=metadata.DistributionFinder.Context()):
            return iter(())

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    with pytest.raises(entrypoints._Unusual):
        entrypoints._scanned("blockflow.blocks")
    assert entrypoints.entry_points("blockflow.blocks") == _stdlib("blockflow.blocks")


def test_an_entry_point_loads_the_attribute_it_names():
    assert EntryPoint("j", "os.path:join", "g").load() is os.path.join
    assert EntryPoint("m", "json", "g").load().__name__ == "json"
    with pytest.raises(ValueError, match="'not a value!' is not 'module:attribute'"):
        EntryPoint("bad", "not a value!", "g").load()



def _outcome(read, group="demo"):
    """What ``read(group)`` gives: its entry points, or the type and text of what it raised."""
    try:
        return read(group)
    except Exception as exc:   # the standard library's own refusals are part of its answer
        return type(exc), str(exc)


def _both(group="demo"):
    return _outcome(entrypoints.entry_points, group), _outcome(_stdlib, group)


def test_a_line_without_equals_in_any_section_is_refused_as_the_standard_library_refuses_it(
        tmp_path, monkeypatch):
    _dist(tmp_path, "odd-1.0.dist-info", "[demo]\none = pkg:one\n[other]\nno equals sign here\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    ours, theirs = _both()
    assert ours == theirs and theirs[0] is TypeError


def test_a_file_the_standard_library_cannot_read_is_left_to_it(tmp_path, monkeypatch):
    _dist(tmp_path / "a", "latin-1.0.dist-info")
    (tmp_path / "a" / "latin-1.0.dist-info" / "entry_points.txt").write_bytes(
        b"[demo]\none = caf\xe9:main\n")
    _dist(tmp_path / "b", "loop-1.0.dist-info")
    os.symlink("entry_points.txt", tmp_path / "b" / "loop-1.0.dist-info" / "entry_points.txt")
    for folder, error in (("a", UnicodeDecodeError), ("b", OSError)):
        monkeypatch.setattr(sys, "path", [str(tmp_path / folder)])
        ours, theirs = _both()
        assert ours == theirs and issubclass(theirs[0], error)


def test_a_folder_name_without_a_name_is_named_by_its_metadata(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    _dist(a, "-1.0.dist-info", "[demo]\nnameless = pkg:one\n")
    (a / "-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: real\nVersion: 1.0\n")
    _dist(b, "real-2.0.dist-info", "[demo]\nhidden = by:the_first\n")
    monkeypatch.setattr(sys, "path", [str(a), str(b)])
    ours, theirs = _both()
    assert ours == theirs == [EntryPoint("nameless", "pkg:one", "demo")]


def test_an_unzipped_egg_on_the_path_is_read_as_the_standard_library_reads_it(tmp_path, monkeypatch):
    egg = tmp_path / "thing-1.0-py3.11.egg"
    _dist(egg, "EGG-INFO", "[demo]\negg = thing:main\n")
    (egg / "EGG-INFO" / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: thing\nVersion: 1.0\n")
    monkeypatch.setattr(sys, "path", [str(egg)])
    ours, theirs = _both()
    assert ours == theirs == [EntryPoint("egg", "thing:main", "demo")]


@pytest.mark.parametrize("entry", [None, b"/no/such/folder", "path"], ids=["None", "bytes", "Path"])
def test_a_path_entry_that_is_not_a_string_is_read_as_the_standard_library_reads_it(
        tmp_path, monkeypatch, entry):
    _dist(tmp_path, "plain-1.0.dist-info", "[demo]\none = plain:main\n")
    entry = tmp_path if entry == "path" else entry
    monkeypatch.setattr(sys, "path", [entry, str(tmp_path)])
    ours, theirs = _both()
    assert ours == theirs


def test_without_the_path_finder_on_the_meta_path_nothing_is_found_there(tmp_path, monkeypatch):
    from importlib.machinery import PathFinder

    _dist(tmp_path, "plain-1.0.dist-info", "[demo]\none = plain:main\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if f is not PathFinder])
    ours, theirs = _both()
    assert ours == theirs == []
