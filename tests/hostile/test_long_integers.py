"""An int too long to be written as text (more digits than Python's limit, 4,300 by default) in a
project made in memory (a script, an import): saving it raised ValueError from the JSON encoder,
an internal error. It is refused now, naming the place, like any value a file cannot hold; a long
int that can be written still round-trips, by the general way (io/values.py) when the one-pass
way (io/plain_items.py) leaves it."""
from __future__ import annotations

import sys

import pytest

from blockflow.errors import ProjectFileError
from blockflow.io.plain_items import plain_value
from blockflow.io.project_io import dumps_project, loads_project
from blockflow.io.rules import PLAIN_INT_BITS
from blockflow.project import Project


def _project(attrs=None, metadata=None) -> Project:
    project = Project(metadata=metadata or {})
    project.add_page("main").add_node("Const", id="c", attrs=attrs or {})
    return project


@pytest.mark.parametrize("attrs, metadata, where", [
    ({"value": 10 ** 5000}, None, "pages[0].nodes[0].attrs.value"),
    ({"value": -(10 ** 5000)}, None, "pages[0].nodes[0].attrs.value"),
    ({"shape": [2, 10 ** 5000]}, None, "pages[0].nodes[0].attrs.shape[1]"),
    (None, {"notes": {"n": 10 ** 5000}}, "metadata.notes.n"),
], ids=["attr", "negative", "list item", "metadata"])
def test_an_int_too_long_for_text_is_refused_where_it_is(attrs, metadata, where):
    with pytest.raises(ProjectFileError) as err:
        dumps_project(_project(attrs, metadata), path="p.bflow.json")
    assert f"at {where}: an integer of more than 4,300 digits cannot be written" in str(err.value), str(err.value)


@pytest.mark.parametrize("digits", [600, 1_000, 4_300])
def test_a_long_int_that_can_be_written_round_trips(digits):
    value = 10 ** (digits - 1) + 7
    text = dumps_project(_project({"value": value, "shape": [3, -value]}))
    attrs = loads_project(text).pages[0].nodes["c"].attrs
    assert attrs == {"value": value, "shape": [3, -value]}


def test_the_one_pass_way_leaves_ints_near_the_lowest_limit_to_the_general_way():
    assert plain_value((1 << PLAIN_INT_BITS) - 1) and plain_value([1, -((1 << PLAIN_INT_BITS) - 1)])
    assert not plain_value(1 << PLAIN_INT_BITS) and not plain_value([1, -(1 << PLAIN_INT_BITS)])
    assert len(str(1 << PLAIN_INT_BITS)) < 640       # Python's lowest setting of the limit


def test_a_lower_limit_set_by_the_program_is_the_one_said(monkeypatch):
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        with pytest.raises(ProjectFileError, match="more than 640 digits"):
            dumps_project(_project({"value": 10 ** 700}))
        assert "10" in dumps_project(_project({"value": 10 ** 600}))
    finally:
        sys.set_int_max_str_digits(old)
