"""Test cases for a composite's port blocks, Input and Output: identities with checked types."""
from __future__ import annotations

from casekit import Case, f32

CASES = {
    "Input": [Case((f32(2, 3),), {"name": "x", "shape": ["batch", 3]}, id="named-dims"),
              Case((f32(4),), {"name": "x", "dtype": "any", "shape": None}, id="any-shape")],
    "Output": [Case((f32(2, 3),), {"name": "y"}, id="matrix"),
               Case((f32(2, 3),), {"name": "y", "dtype": "float32", "shape": ["batch", 3]}, id="declared")],
}
NOT_DIFFERENTIABLE: dict = {}
