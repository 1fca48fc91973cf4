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


@pytest.mark.parametrize("project, page", _pages())
def test_a_compile_gives_what_it_gave(project, page, request):
    key = request.node.callspec.id
    got = fingerprint(compile_project(project, page))
    want = RECORDED[key]
    assert {k: v for k, v in got.items() if want.get(k) != v} == {}
    assert got.keys() == want.keys()


def test_every_recorded_page_is_compiled():
    assert {p.id for p in _pages()} == set(RECORDED)
