"""A block's wires as the compile keeps them (issue 18, compile21): one number or a tuple of
numbers a block (compile/wires.py), where each block had a list. Compared with the lists they
replaced, made here the old way from the good wires, on every recorded page (generated pages
with every kind of port, broken blocks and wires, composites; every sample) and on pages with
many wires into one block, duplicate wires and wires drawn in no order."""
from __future__ import annotations

import random

import pytest

from blockflow.compile.compiler import _Compiler, compile_project
from blockflow.compile.flatten import flatten
from blockflow.compile.wires import Wires
from blockflow.project import Project
from blockflow.registry import default_registry

from compile_record import fingerprint, generated_pages, sample_pages


def _recorded():
    for name, project in [*generated_pages(), *sample_pages()]:
        for page in project.pages:
            yield pytest.param(project, page.name, id=f"{name}/{page.name}")


def _checked_wires(page, composites):
    """The compiler's Wires for ``page`` (flattened first), and the compiler."""
    registry = default_registry()
    flat, hierarchy = flatten(page, composites, registry)
    c = _Compiler(flat, registry, None, hierarchy)
    specs, _ = c._check_blocks()
    fed, _, _ = c._check_wires(specs)
    return fed, c


def _lists(fed: Wires, index) -> list:
    """Per block number, the list of its wires' places, made as Wires.add made it before."""
    into = [None] * len(fed.into)
    for g, e in enumerate(fed.good):
        i = index[e.dst]
        if into[i] is None:
            into[i] = [g]
        else:
            into[i].append(g)
    return into


def _same_as_lists(fed: Wires, c) -> None:
    lists = _lists(fed, c.index)
    for i, want in enumerate(lists):
        got = fed.into[i]
        if want is None:
            assert got is None and fed.of(i) == ()
        elif len(want) == 1:
            assert type(got) is int and got == want[0] and fed.of(i) == (want[0],)
        else:
            assert type(got) is tuple and list(got) == want and list(fed.of(i)) == want
        assert fed.wires_into(i) == [fed.good[g] for g in want or ()]
        for g in want or ():
            port = fed.good[g].dst_port
            first = next(fed.good[h] for h in want if fed.good[h].dst_port == port)
            assert fed.find(i, port) is first
            assert fed.get((c.ids[i], port)) is first
        assert fed.find(i, "no such port") is None
        assert fed.ports(c.ids[i]) == [fed.good[g].dst_port for g in want or ()]


@pytest.mark.parametrize("project, page", list(_recorded()))
def test_a_blocks_wires_are_the_lists_they_replaced(project, page):
    fed, c = _checked_wires(project.page(page), project.composites)
    _same_as_lists(fed, c)


def _crowded(seed: int) -> Project:
    """AddN blocks fed by many wires (some drawn twice, some a second wire into one port),
    the wires drawn in a shuffled order."""
    rng = random.Random(seed)
    p = Project()
    pg = p.add_page("p")
    for i in range(6):
        pg.add_node("Placeholder", id=f"x{i}", attrs={"shape": [3]})
    wires = []
    for k in range(8):
        pg.add_node("AddN", id=f"s{k}")
        for j in range(rng.randint(1, 7)):
            wires.append((f"x{rng.randrange(6)}", "output", f"s{k}", f"inputs[{j}]"))
        if rng.random() < 0.5:
            wires.append(wires[-1])                                      # the same wire twice
            wires.append((f"x{rng.randrange(6)}", "output", f"s{k}", "inputs[0]"))   # a second into one port
    rng.shuffle(wires)
    for w in wires:
        pg.connect(*w)
    return p


@pytest.mark.parametrize("seed", range(6))
def test_crowded_blocks_keep_their_wires_in_page_order(seed):
    project = _crowded(seed)
    fed, c = _checked_wires(project.pages[0], project.composites)
    _same_as_lists(fed, c)
    assert any(type(w) is tuple and len(w) > 2 for w in fed.into)
    program = compile_project(project)   # the second wire into a port is reported, as before
    assert fingerprint(program) == fingerprint(compile_project(project))


def test_wires_add_keeps_a_number_then_a_tuple():
    fed = Wires({"a": 0, "b": 1}, 2)
    for g in range(4):
        fed.add(object(), 1, 0)
        assert fed.into[1] == (0 if g == 0 else tuple(range(g + 1)))
    assert fed.into[0] is None and fed.of(0) == () and fed.of(1) == (0, 1, 2, 3)
    assert fed.src == [0, 0, 0, 0] and fed.type == [None] * 4
