"""Hostile values: random streams that two ids could share, numbers that do not fit their dtype,
Variables whose first value does not fit their declared shape.

Each case says where (block, port, value) and what, as a compile diagnostic or a run error, never
a silent wrap."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from blockflow.compiler import compile_project
from blockflow.project import Project
from blockflow.runtime import run


# ------------------------------------------------------------------------------ random streams
# A well-known pair of words with the same CRC32 (the stream key before this fix used the
# id's CRC32, so these two blocks drew identical numbers).
CRC_TWINS = ("plumless", "buckeroo")


def _two_samplers(a: str, b: str, seed: int = 0) -> Project:
    p = Project()
    pg = p.add_page("main")
    for nid in (a, b):
        pg.add_node("RandomUniform", id=nid, attrs={"seed": seed, "dtype": "float32"}, inputs={"shape": [64]})
    return p


def test_ids_with_equal_crc32_draw_different_numbers():
    a, b = CRC_TWINS
    assert zlib.crc32(a.encode()) == zlib.crc32(b.encode()) and a != b
    program = compile_project(_two_samplers(a, b))
    r = run(program)
    x, y = r.value(a), r.value(b)
    assert not np.array_equal(x, y)
    # still a deterministic function of the project: a fresh compile draws the same numbers
    r2 = run(compile_project(_two_samplers(a, b)))
    np.testing.assert_array_equal(r2.value(a), x)
    np.testing.assert_array_equal(r2.value(b), y)


def test_streams_follow_seed_step_and_run_seed():
    program = compile_project(_two_samplers("u", "v"))
    base = run(program).value("u")
    assert not np.array_equal(run(program, step=1).value("u"), base)
    assert not np.array_equal(run(program, run_seed=7).value("u"), base)
    other = compile_project(_two_samplers("u", "v", seed=1))
    assert not np.array_equal(run(other).value("u"), base)
    np.testing.assert_array_equal(run(program, step=0).value("u"), base)
