"""An imported model's units (its name scopes and repeated units, framed by the layout) made
composite blocks: one instance per unit on the page, one definition per kind of unit.

Each unit is grouped the way the editor's Group does it (compile/grouping.py), so the page
computes exactly what it did. Inside the definition the blocks lose the unit's name
(``res3_1_branch2a`` becomes ``branch2a``), and each Variable's first value becomes a parameter
of the composite (a tensor), given by the instance: a unit's weights stay its own, and Reset
gives each instance back its imported weights. Units alike but for those weights (ResNet's
res3_1, res3_2 and res3_3) then have equal definitions, and share one.
"""
from __future__ import annotations

import os
import re
from collections import defaultdict

import numpy as np

from blockflow.compile.grouping import plan_group, restructure
from blockflow.composite import INPUT_BLOCK, OUTPUT_BLOCK, PARAM_REF, block_name, composite_name_problem
from blockflow.errors import ProjectError
from blockflow.importing.onnx_layout import LOSS_FRAME
from blockflow.project import valid_node_id
from blockflow.spec import Attr

__all__ = ["units_as_composites"]


def units_as_composites(project, page, registry, program, source: str) -> tuple[int, int]:
    """Make each framed unit of the imported ``page`` an instance of a composite (``program``: the
    page compiled, for the ports' types); (units, composites made)."""
    units = [f for f in page.frames if f.title != LOSS_FRAME]
    made = []
    # last unit first: a unit's Inputs are typed from the blocks feeding it, which the program
    # knows by their ids until they are grouped in turn
    keys = {f.title for f in units}
    for frame in reversed(units):
        unit = _group(project, page, frame, registry, program, keys)
        if unit is not None:
            made.append(unit)
    made.reverse()
    _share_definitions(project, page, made, os.path.basename(str(source)))
    return len(made), len({page.nodes[inst].block for inst, _name, _key in made})


def _group(project, page, frame, registry, program, keys) -> tuple[str, str, str] | None:
    """(instance id, composite name, unit key) of the unit ``frame`` grouped; None when Group
    refuses it (then its blocks stay on the page: a plan changes nothing)."""
    key = frame.title
    name = _free(_ident(key), project.composites)
    ids = [nid for nid in frame.blocks if nid in page.nodes]
    try:
        plan = plan_group(project, page.name, ids, name, program=program, registry=registry)
    except ProjectError:
        return None
    restructure(project, plan)
    page.frames = [f for f in page.frames if f is not frame and f.blocks != frame.blocks]
    comp = project.composites[name]
    comp.page.frames = []        # the unit's own frame: the definition is the unit
    inst = plan.focus
    want = _ident(key)
    if want != inst and page.rename_problem(inst, want) == "":
        page.rename_node(inst, want)
        inst = want
    _drop_unit_name(page, inst, comp, key, keys - {key})
    _weights_as_params(comp, page.nodes[inst])
    return inst, name, key


def _drop_unit_name(page, inst: str, comp, key: str, others: set) -> None:
    """Inner ids, labels and port names without the unit's name: ``res3_1_branch2a`` ->
    ``branch2a`` (a port renamed, the page's wires to the instance ``inst`` follow it). A block
    named after another unit (``others``: a branch without weights, named after what it reads)
    is named after its op instead."""
    instance = page.nodes[inst]
    is_port = {nid: n.block in (INPUT_BLOCK, OUTPUT_BLOCK) for nid, n in comp.page.nodes.items()}
    for nid in [n for n, port in is_port.items() if not port]:
        node = comp.page.nodes[nid]
        new = _inner(nid, key)
        if new == nid and any(_inner(nid, k) != nid for k in others):
            new = _free(node.block.lower(), comp.page.nodes)
        if new != nid and comp.page.rename_problem(nid, new) == "":
            comp.page.rename_node(nid, new)
            instance.state = {_renamed_key(k, nid, new): v for k, v in instance.state.items()}
        node.label = _inner(node.label, key) if node.label.startswith(key) else node.label
    # the ports after the blocks, whose names they would otherwise take; a lone output is "output"
    outputs = [n for n, port in is_port.items() if port and comp.page.nodes[n].block == OUTPUT_BLOCK]
    names = {n.attrs.get("name") for nid, n in comp.page.nodes.items() if is_port.get(nid)}
    for nid in [n for n, port in is_port.items() if port]:
        node = comp.page.nodes[nid]
        old_port = node.attrs.get("name")
        new = "output" if outputs == [nid] else _inner(nid, key)
        if new == nid or new in names or old_port != nid or comp.page.rename_problem(nid, new):
            continue
        comp.page.rename_node(nid, new)
        node.attrs = {**node.attrs, "name": new}
        names.add(new)
        page.edges = [_port_renamed(e, inst, old_port, new) for e in page.edges]


def _port_renamed(e, inst: str, old: str, new: str):
    if e.src == inst and e.src_port == old:
        return type(e)(e.src, new, e.dst, e.dst_port)
    if e.dst == inst and e.dst_port == old:
        return type(e)(e.src, e.src_port, e.dst, new)
    return e


def _inner(text: str, key: str) -> str:
    """``text`` less a leading ``key`` and separator, when what is left is a valid id."""
    for stem in (key, _ident(key)):
        if text.startswith(stem) and text[len(stem):len(stem) + 1] in ("_", ".", "-", "/"):
            rest = text[len(stem) + 1:]
            for out in (rest, "_" + rest):     # Inception's 1x1 becomes _1x1: an id starts with a letter or _
                if valid_node_id(out):
                    return out
    return text


def _renamed_key(state_key: str, old: str, new: str) -> str:
    for sep in (":", "/"):
        if state_key.startswith(old + sep):
            return new + state_key[len(old):]
    return state_key


def _weights_as_params(comp, instance) -> None:
    """Each Variable holding its imported value reads it from a tensor parameter instead, which
    the instance gives: the definition no longer holds one unit's weights."""
    taken = {p.name for p in comp.params}
    for nid, node in comp.page.nodes.items():
        value = node.attrs.get("initial_value")
        if node.block != "Variable" or node.attrs.get("initializer") != "value" or not isinstance(value, np.ndarray):
            continue
        pname = _free(re.sub(r"\W", "_", nid), taken)
        taken.add(pname)
        comp.params.append(Attr(pname, "tensor", None, doc=f"the first value of the Variable {nid}"))
        # the group mixed a seed into the attrs per instance; a value given makes it unused
        attrs = {k: v for k, v in node.attrs.items() if k != "seed"}
        attrs["initial_value"] = {PARAM_REF: pname}
        node.attrs = attrs
        instance.attrs = {**instance.attrs, pname: value}


def _share_definitions(project, page, made, source: str) -> None:
    """Units whose definitions are equal share the first one's, named after what their names
    share (``res3`` for res3_1 .. res3_3); each composite gets a note saying what it is."""
    alike = defaultdict(list)
    for inst, name, key in made:
        alike[_signature(project.composites[name])].append((inst, name, key))
    for group in alike.values():
        (inst0, name0, key0), rest = group[0], group[1:]
        comp = project.composites[name0]
        if rest:
            del project.composites[name0]
            for _inst, name, _key in rest:
                del project.composites[name]
            shared = _free(_stem([k for _i, _n, k in group]) or f"{_ident(key0)}_unit", project.composites)
            comp.name, comp.page.name = shared, block_name(shared)
            project.composites[shared] = comp
            for inst, _name, _key in group:
                page.nodes[inst].block = block_name(shared)
        units = ", ".join(k for _i, _n, k in group)
        comp.doc = (f"The unit{'s' if rest else ''} {units} of the ONNX model {source}, made a composite by "
                    f"the import{' (one definition: they differ only in their weights)' if rest else ''}. "
                    f"Its parameters are the first values of its Variables: each instance gives its own "
                    f"weights, and Reset gives them back.")


def _signature(comp) -> tuple:
    """What makes two definitions compute the same function of their ports and parameters: the
    blocks, their attrs and inline values, the wires and the parameters (not places or labels)."""
    nodes = tuple(sorted((nid, n.block, _frozen(n.attrs), _frozen(n.inputs)) for nid, n in comp.page.nodes.items()))
    return nodes, frozenset(comp.page.edges), tuple((p.name, p.kind) for p in comp.params)


def _frozen(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tobytes()
    return value


def _stem(keys: list[str]) -> str:
    """What ``keys`` share, less a trailing index and separators (``res3_1``, ``res3_2`` -> ``res3``)."""
    prefix = os.path.commonprefix(keys).rstrip("_.-")
    return _ident(prefix) if prefix and composite_name_problem(_ident(prefix)) == "" else ""


def _ident(text: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_.\-]", "_", text)
    return out if valid_node_id(out) else f"unit_{out}" if valid_node_id(f"unit_{out}") else "unit"


def _free(name: str, taken) -> str:
    out, n = name, 2
    while out in taken:
        out, n = f"{name}_{n}", n + 1
    return out
