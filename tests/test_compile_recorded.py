"""A compile gives what it gave before it was rewritten by dense block numbers (issue 18,
compile19): generated pages (every kind of input and output, broken blocks and wires, a cycle,
composite instances with dimensions, sharing and a bad parameter) and every sample project,
against fingerprints recorded from the compile as it was (tests/compile_record.py)."""
from __future__ import annotations

import json

import pytest

from blockflow.compile.compiler import compile_project

from compile_record import RECORD, fingerprint, generated_pages, sample_pages

RECORDED = json.loads(RECORD.read_text())


def _pages():
    for name, project in [*generated_pages(), *sample_pages()]:
        for page in project.pages:
            yield pytest.param(project, page.name, id=f"{name}/{page.name}")


@pytest.mark.parametrize("project, page", list(_pages()))
def test_a_compile_gives_what_it_gave(project, page, request):
    key = request.node.callspec.id
    got = fingerprint(compile_project(project, page))
    want = RECORDED[key]
    assert {k: v for k, v in got.items() if want.get(k) != v} == {}
    assert got.keys() == want.keys()


def test_every_recorded_page_is_compiled():
    assert {p.id for p in _pages()} == set(RECORDED)


def test_slots_and_steps_made_fast_are_the_frozen_classes():
    import dataclasses

    from blockflow.compile.program import Slot, Step, make_slot, make_step
    from blockflow.spec import TensorType

    t = TensorType((4,), "float32")
    s = make_slot(3, "n", "y", t, True, False)
    assert type(s) is Slot and s == s and s != Slot(3, "n", "y", t, True, False)   # eq by identity
    assert repr(s) == repr(Slot(3, "n", "y", t, True, False))
    step = make_step(0, "n", None, {}, (1,), (None,), (3,), ((0, None, None),), (3,), (0,), ())
    assert type(step) is Step and step.flat_input(0) == 1 and step.out_decl == (0,)
    for obj, field in ((s, "index"), (step, "inputs")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, 0)
