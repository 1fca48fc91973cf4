"""What both lowering tables share (torch_lowering.py, onnx_lowering.py): a table filled by
decorators in the modules it names, the fields of the call a lowering is handed, and the checks
every export makes before it writes anything (the page compiles; every block it needs has a
lowering, or all those without one are named)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from blockflow.compile.program import Program, Step
from blockflow.export.errors import ExportError
from blockflow.spec import TensorType

__all__ = ["LoweringTable", "BlockCall", "call_fields", "check_compiled", "refuse_unlowered"]


class LoweringTable:
    """Block name -> lowering for one target (``what``: "torch", "ONNX"); ``modules`` are the
    modules of blockflow.export whose decorators fill it, imported when it is first read."""

    def __init__(self, what: str, modules: tuple):
        self.what, self.modules = what, modules
        self.lowerings: dict[str, Callable] = {}

    def register(self, *names: str):
        """A decorator: the function lowers the blocks ``names``."""
        def add(fn):
            for name in names:
                if name in self.lowerings:
                    raise ValueError(f"two {self.what} lowerings for {name}")
                self.lowerings[name] = fn
            return fn
        return add

    def table(self) -> dict[str, Callable]:
        for module in self.modules:
            importlib.import_module(f"blockflow.export.{module}")
        return self.lowerings


@dataclass
class BlockCall:
    """One block to lower, as both tables see it. ``ins`` holds per declared input what the
    target calls the value (an expression, a value name; a list of them for an InputList; None
    for an unwired optional input); for a static input, its value itself. ``in_types`` and
    ``out_types``: the inferred types (a list for an InputList)."""

    node: str
    block: str
    attrs: dict
    ins: list
    in_types: list
    out_types: list
    input_names: list
    output_names: list
    static: list

    def arg(self, name: str):
        """What input ``name`` is: its value's name or expression, or a static input's value."""
        return self.ins[self.input_names.index(name)]

    def type_of(self, name: str) -> TensorType:
        return self.in_types[self.input_names.index(name)]

    def is_static(self, name: str) -> bool:
        return self.static[self.input_names.index(name)]

    def rank(self, name: str) -> int:
        return len(self.type_of(name).shape)


def call_fields(program: Program, st: Step, expr_of) -> dict:
    """The fields of the call a step's lowering is handed: per declared input ``expr_of(slot)``
    (a list for an InputList, None unwired) or a static input's value, the inferred types, the
    port names."""
    ins, types = [], []
    for pos, src in enumerate(st.inputs):
        if st.static[pos] is not None:
            ins.append(st.static[pos])
            types.append(None)
        elif isinstance(src, tuple):
            ins.append([expr_of(s) for s in src])
            types.append([program.slot(s).type for s in src])
        else:
            ins.append(expr_of(src))
            types.append(None if src is None else program.slot(src).type)
    return dict(node=st.node, block=st.spec.name, attrs=dict(st.attrs), ins=ins, in_types=types,
                out_types=[program.slot(o).type for o in st.outputs],
                input_names=[p.name for p in st.spec.inputs],
                output_names=[program.slot(o).port for o in st.outputs],
                static=[v is not None for v in st.static])


def check_compiled(program: Program) -> None:
    """ExportError listing the page's errors when it does not compile."""
    if not program.ok:
        errors = [str(d) for d in program.errors]
        raise ExportError(f"page '{program.page_name}' does not compile ({len(errors)} error(s); "
                          f"blockflow check lists them)", errors)


def refuse_unlowered(program: Program, refused: dict, what: str) -> None:
    """ExportError naming every kind of block in ``refused`` ({block: [nodes]}) and its nodes."""
    if refused:
        problems = [f"{name} ({', '.join(nodes[:5])}{', ...' if len(nodes) > 5 else ''})"
                    for name, nodes in sorted(refused.items())]
        raise ExportError(f"{len(refused)} kind(s) of block on page '{program.page_name}' have no "
                          f"{what}: {', '.join(sorted(refused))}", problems)
