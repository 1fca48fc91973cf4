"""The Python API's run() given what a careless or hostile caller passes besides feeds: values
for Variables and a gradient seed that numpy's cast would change (1e300 into float32, a complex
part dropped, text), a fetch given as one string, a target that is no name, feeds that are no
mapping (an array, a list: numpy's ambiguous truth value, unhashable arrays). Each is a RunError
naming the argument and the value, as a feed's is (test_values.py), never numpy's warning, a
silent Inf or a TypeError from inside the look-up."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.errors import RunError
from blockflow.project import Project
from blockflow.run.runtime import run, run_backward


def _program(*extra_ids):
    """Variable v (float32[2]) summed into s, the loss, and a Const per id of ``extra_ids``."""
    p = Project()
    page = p.add_page("main")
    page.add_node("Variable", id="v", attrs={"shape": [2], "dtype": "float32", "initializer": "zeros"})
    page.add_node("Sum", id="s", attrs={})
    page.connect("v", "ref", "s", "input")
    for nid in extra_ids:
        page.add_node("Const", id=nid, attrs={"value": [1.0, 2.0], "dtype": "float32"})
    page.loss = "s"
    program = compile_project(p, "main")
    assert program.ok, program.diagnostics
    return program


BAD_VALUES = {
    "past float32": (np.array([1e300, 1.0]), r"1e\+300 \(at \[0\]\) does not fit float32"),
    "complex": (np.array([1j, 2.0]), "expected numbers for float32, got complex128 values"),
    "text": (np.array(["a", "b"]), "expected numbers for float32, got <U1 values"),
    "objects": (np.array([object(), 1.0], dtype=object), "expected numbers for float32, got object values"),
    "ragged": ([[1.0], [1.0, 2.0]], ".*inhomogeneous shape"),
}


@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize("bad", list(BAD_VALUES), ids=list(BAD_VALUES))
def test_a_variables_value_a_cast_would_change_is_refused_naming_the_variable(bad, check):
    value, says = BAD_VALUES[bad]
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # numpy's overflow or complex warning reached the caller
        with pytest.raises(RunError, match=r"value given for Variable main/v \(float32\[2\]\): " + says):
            run_backward(_program(), variables={"v": value}, check_numerics=check)


def test_a_variables_value_that_fits_is_taken_exactly():
    r = run_backward(_program(), variables={"v": [1, 2]})
    assert float(r.value("s")) == 3.0
    with pytest.raises(RunError, match=r"value given for Variable main/v has shape \[3\], the Variable is float32\[2\]"):
        run_backward(_program(), variables={"v": np.zeros(3, np.float32)})


@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize("bad", list(BAD_VALUES), ids=list(BAD_VALUES))
def test_a_gradient_seed_a_cast_would_change_is_refused_naming_the_target(bad, check):
    value, says = BAD_VALUES[bad]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RunError, match=r"the gradient seed for the target main/v:ref \(float32\[2\]\): " + says):
            run(_program(), target="v", grad_seed=value, check_numerics=check)


def test_a_gradient_seed_that_fits_is_used():
    r = run(_program(), target="v", grad_seed=[3, 4])
    np.testing.assert_array_equal(r.grad("v"), [3.0, 4.0])


def test_fetch_given_as_one_string_is_refused_not_split_into_letters():
    program = _program("a", "b")
    with pytest.raises(RunError, match="fetch must be a collection of names .* not the string 'ab'"):
        run(program, fetch="ab", record=False)     # before: fetched the nodes 'a' and 'b'
    assert float(run(program, fetch=["s"], record=False).value("s")) == 0.0


@pytest.mark.parametrize("name", [5, 1.5, object(), ("s", "output", "x")])
def test_a_target_or_fetch_that_is_no_name_is_refused_saying_so(name):
    with pytest.raises(RunError, match=r"^target must name an output as 'node', 'node:port' or \(node, port\)"):
        run(_program(), target=name)
    with pytest.raises(RunError, match=r"^each fetch must name an output as"):
        run(_program(), fetch=[name], record=False)


def _open_page():
    """Placeholder x of open size [-1] summed into s: its repeated runs take the short way."""
    p = Project()
    page = p.add_page("main")
    page.add_node("Placeholder", id="x", attrs={"shape": [-1], "dtype": "float32"})
    page.add_node("Sum", id="s", attrs={})
    page.connect("x", "output", "s", "input")
    page.loss = "s"
    return compile_project(p, "main")


@pytest.mark.parametrize("feeds", [np.arange(5, dtype=np.float32), [np.arange(5, dtype=np.float32)], "x",
                                   (("x", np.arange(5, dtype=np.float32)),), 5],
                         ids=["array", "list", "string", "pairs", "number"])
def test_feeds_that_are_no_mapping_are_refused_saying_so(feeds):
    program = _open_page()
    x = np.arange(5, dtype=np.float32)
    for _ in range(3):      # the kind of run seen before: the repeated run's short way is tried first
        run(program, {"x": x}, target="s", record=False)
    for record in (False, True):
        with pytest.raises(RunError, match=f"^feeds must be a mapping of Placeholder ids to values, "
                                           f"not {type(feeds).__name__}$"):
            run(program, feeds, target="s", record=record)
    assert float(run(program, {"x": x}, target="s", record=False).value("s")) == 10.0


@pytest.mark.parametrize("variables, says", [
    ([1.0, 2.0], "^variables must be a mapping of Variable ids to values, not list$"),
    (np.zeros(2, np.float32), "^variables must be a mapping of Variable ids to values, not ndarray$"),
    ({5: np.zeros(2), "v": np.zeros(2)}, "^values given for Variables that are not on page 'main': 5$"),
], ids=["list", "array", "number-key"])
def test_variables_that_are_no_mapping_of_ids_are_refused_saying_so(variables, says):
    with pytest.raises(RunError, match=says):
        run_backward(_program(), variables=variables)
