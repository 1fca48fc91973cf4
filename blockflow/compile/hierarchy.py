"""What every compile needs of composites, whether or not its page has an instance to flatten:
the Hierarchy (empty for a plain page), the blocks that are a composite's ports, and whether an
attr value holds a reference (a page with one must be flattened).

Flattening itself is flatten.py's, with the Instance and DimRef only it makes, imported by the
compiler only when a page needs it (most do not: the module and its three frozen dataclasses
were a part of every command's start, docs/performance.md). flatten.py imports these names back,
and still gives them to whoever imports them from there.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from blockflow.composite import DIM_REF, INPUT_BLOCK, OUTPUT_BLOCK, PARAM_REF

__all__ = ["Hierarchy", "ref_inside", "COMPOSITE_INPUT", "COMPOSITE_OUTPUT"]

#: the blocks that are a composite's ports (declared in the block library)
COMPOSITE_INPUT = INPUT_BLOCK
COMPOSITE_OUTPUT = OUTPUT_BLOCK


@dataclass
class Hierarchy:
    """What flattening knows: the instances (flatten.py's Instance), the flat wire of each drawn wire by level, the
    Variables an instance reads from another, the nodes whose attrs wait for dimensions."""

    instances: dict = field(default_factory=dict)        # flat id -> Instance
    #: (level, drawn Edge) -> flat Edge, for every wire drawn touching an instance, or leaving a
    #: Variable inside one (which may be read from a shared instance); any other wire drawn at
    #: level L is that wire with both ends prefixed "L/" (Program.flat_wire). Not one entry per
    #: inner wire: 1,000 instances of a 20-block composite would keep 30,000 of them.
    wires: dict = field(default_factory=dict)
    shared: dict = field(default_factory=dict)           # flat Variable id left out -> flat id read
    dim_nodes: dict = field(default_factory=dict)        # flat id -> the instances its DimRefs name
    problems: list = field(default_factory=list)
    unexpanded: set = field(default_factory=set)         # instances left as they were (problems)

    @property
    def empty(self) -> bool:
        return not self.instances and not self.unexpanded


def ref_inside(value) -> bool:
    """Whether an attr value is or holds a parameter or dimension reference."""
    if type(value) is dict:
        return len(value) == 1 and next(iter(value)) in (PARAM_REF, DIM_REF)
    return isinstance(value, (list, tuple)) and any(ref_inside(x) for x in value)
