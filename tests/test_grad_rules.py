"""Tests of the blocks' stated gradient rules (``BlockSpec.grad_rule``): every differentiable block
states one, for each input that can take a gradient, naming only its own ports; the words about
ties say what the vjp does; the block reference shows the rules."""
from __future__ import annotations

import re

import numpy as np
import pytest

from blockflow.cli import blocks_markdown
from blockflow.registry import default_registry
from blockflow.spec import BlockDeclarationError, Input, Output, block

_REGISTRY = default_registry()
_DIFFERENTIABLE = [pytest.param(s, id=s.name) for s in sorted(_REGISTRY, key=lambda s: s.name)
                   if s.gradient == "vjp"]
_WITH_RULES = [pytest.param(s, id=s.name) for s in sorted(_REGISTRY, key=lambda s: s.name) if s.grad_rule]

# ``dNAME =`` or ``dNAME[i] =``, wherever it starts a word: "with transpose_a: da = b · gᵀ" counts.
_NAMED = re.compile(r"(?<!\w)d([A-Za-z_]\w*)(?:\[[^\]]*\])? =")


def named_ports(rule: str) -> list[str]:
    """The port names of the ``dNAME = ...`` statements in a rule, in order."""
    return _NAMED.findall(rule)


def unknown_ports(spec, rule: str) -> set[str]:
    """The names a rule's ``dNAME =`` statements give that are not inputs of ``spec`` (an
    InputList counts by its base name: ``dvalues[i]``)."""
    return set(named_ports(rule)) - {p.name for p in spec.inputs}


def test_the_parser_reads_statements_anywhere_in_a_line_and_the_check_catches_strangers():
    rule = "dx = g · y\ndvalues[i] = g\nwith transpose_a: da = b · gᵀ, db = a · g\nn = the count"
    assert named_ports(rule) == ["x", "values", "a", "b"]
    tanh = _REGISTRY["Tanh"]
    assert unknown_ports(tanh, tanh.grad_rule) == set()
    assert unknown_ports(tanh, "dinput = g · (1 − y²)") == {"input"}  # Tanh's input is x
    assert unknown_ports(tanh, "dy = g") == {"y"}  # an output is not an input


@pytest.mark.parametrize("spec", _DIFFERENTIABLE)
def test_a_differentiable_block_states_its_rule_for_each_input_that_takes_a_gradient(spec):
    assert spec.grad_rule.strip(), f"{spec.name} has a vjp but no grad_rule"
    stated = set(named_ports(spec.grad_rule))
    wanted = {p.name for p in spec.inputs if p.differentiable}
    assert wanted <= stated, f"{spec.name}'s rule says nothing of d{', d'.join(sorted(wanted - stated))}"


@pytest.mark.parametrize("spec", _WITH_RULES)
def test_a_rule_names_only_the_block_s_own_inputs(spec):
    assert not unknown_ports(spec, spec.grad_rule), \
        f"{spec.name}'s rule names {sorted(unknown_ports(spec, spec.grad_rule))}, not inputs of the block " \
        f"({', '.join(p.name for p in spec.inputs)})"
    assert spec.grad_rule == spec.grad_rule.strip() and "\n\n" not in spec.grad_rule


def test_every_differentiable_block_of_the_library_has_a_rule():
    assert len(_DIFFERENTIABLE) >= 80  # the library itself, not an empty registry
    assert not [p.values[0].name for p in _DIFFERENTIABLE if not p.values[0].grad_rule]


def test_stop_gradient_says_that_no_gradient_is_sent():
    spec = _REGISTRY["StopGradient"]
    assert spec.gradient == "stop"
    assert "no gradient" in spec.grad_rule and "dinput = 0" in spec.grad_rule


# --------------------------------------------------------------------------------------------
# The words about ties are what the vjp does.


def test_max_and_min_rules_split_ties_evenly_as_their_vjps_do():
    for name, x in (("Max", [1.0, 3.0, 3.0]), ("Min", [3.0, 1.0, 1.0])):
        spec = _REGISTRY[name]
        x = np.array(x)
        out = spec.forward(x, None, keep_dims=False)
        (gx, _) = spec.vjp(np.float64(1.0), out, x, None, keep_dims=False)
        np.testing.assert_array_equal(gx, [0.0, 0.5, 0.5])
        assert "split evenly among ties" in spec.grad_rule


def test_maxpool_rule_gives_a_tie_to_the_first_max_as_its_vjp_does():
    spec = _REGISTRY["MaxPool"]
    x = np.array([2.0, 2.0, 1.0, 0.0]).reshape(1, 2, 2, 1)
    attrs = dict(ksize=(1, 2, 2, 1), strides=(1, 2, 2, 1), padding="VALID", explicit_paddings=(), data_format="NHWC")
    out = spec.forward(x, **attrs)
    (gx,) = spec.vjp(np.ones_like(out), out, x, **attrs)
    np.testing.assert_array_equal(gx.reshape(-1), [1.0, 0.0, 0.0, 0.0])
    assert "first max" in spec.grad_rule and "not split" in spec.grad_rule


def test_maximum_and_minimum_rules_give_a_tie_to_x_as_their_vjps_do():
    for name in ("Maximum", "Minimum"):
        spec = _REGISTRY[name]
        x = y = np.array([2.0])
        gx, gy = spec.vjp(np.array([1.0]), spec.forward(x, y), x, y, needs=(True, True))
        assert (gx[0], gy[0]) == (1.0, 0.0), name
        assert "a tie goes to x" in spec.grad_rule


# --------------------------------------------------------------------------------------------
# The declaration API and the block reference


def _declare(**body):
    namespace = {"__doc__": "Doubles x.", "inputs": (Input("x"),), "outputs": (Output("y"),),
                 "infer": lambda x: x, "forward": lambda x: x + x,
                 "vjp": lambda g, out, x: (g + g,)}
    namespace.update(body)
    return block("Double", category="test")(type("Double", (), namespace))


def test_grad_rule_is_carried_into_the_frozen_spec_and_defaults_to_empty():
    spec = _declare(grad_rule="""
        dx = 2 · g
        """)
    assert spec.grad_rule == "dx = 2 · g"
    assert _declare().grad_rule == ""
    with pytest.raises(Exception):
        spec.grad_rule = "dx = g"


def test_grad_rule_must_be_a_string():
    with pytest.raises(BlockDeclarationError, match="'Double'.*grad_rule must be a string"):
        _declare(grad_rule=("dx = 2 · g",))


def test_the_block_reference_shows_each_rule_under_its_block():
    text = blocks_markdown(_REGISTRY)
    tanh = text[text.index("\n### Tanh\n"):]
    tanh = tanh[:tanh.index("\n### ", 1)]
    assert "Gradient: differentiable.\n\n```text\ndx = g · (1 − y²)\n```" in tanh
    stop = text[text.index("\n### StopGradient\n"):]
    assert _REGISTRY["StopGradient"].grad_rule in stop[:stop.index("\n### ", 1)]
