"""An imported model's units (its name scopes and repeated units, framed by the layout) made
composite blocks: one instance per unit on the page, one definition per kind of unit; and before
them, each ONNX node that needed several blocks (a Gemm: MatMul and Add; a Conv with a bias:
Conv2D and BiasAdd) made a small composite named after its op, so one node is one block.

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
from blockflow.composite import (INPUT_BLOCK, OUTPUT_BLOCK, PARAM_REF, block_name, composite_name,
                                 composite_name_problem, rename_composite)
from blockflow.errors import ProjectError
from blockflow.importing.onnx_layout import LOSS_FRAME
from blockflow.importing.onnx_names import is_numbered
from blockflow.project import split_port, valid_node_id
from blockflow.spec import Attr

__all__ = ["units_as_composites", "nodes_as_composites", "order_by_use"]


class _TypesOnly:
    """A program as Group asks it for the ports' types alone. Group also keeps the first values
    of the Variables it moves, drawn from their initializers, since moving changes their seeds;
    the import's Variables take their values from parameters, so there is nothing to keep, and
    drawing them would copy every weight (VGG's 550 MB)."""

    variable_values = None

    def __init__(self, program):
        self.port_type = program.port_type


def nodes_as_composites(project, page, registry, program, origin: dict, ops: list, source: str) -> dict:
    """Make the blocks of each ONNX node mapped to several an instance of a composite named after
    its op (``origin``: {block id: the index of the node it was made for}; ``ops``: each node's
    op); {each grouped block's id: its instance's id}."""
    by_node = defaultdict(list)
    for nid in page.nodes:
        if origin.get(nid) is not None:
            by_node[origin[nid]].append(nid)
    types, moved, made = _TypesOnly(program), {}, []
    # last node first, as for units: what feeds a node is typed by ids not grouped yet
    for index in sorted(by_node, reverse=True):
        ids = by_node[index]
        blocks = [nid for nid in ids if page.nodes[nid].block != "Variable"]
        if len(blocks) < 2:
            continue
        op = ops[index]
        name = _free(_ident(op), project.composites)
        try:
            plan = plan_group(project, page.name, ids, name, program=types, registry=registry)
        except ProjectError:
            continue
        seeds = _seeds(page, ids)
        restructure(project, plan)
        _seeds_back(project.composites[name], seeds)
        inst = _renamed_instance(page, plan.focus, min(blocks, key=len))
        comp = project.composites[name]
        _drop_unit_name(page, inst, comp, inst, set(), last_segment=True)
        _weights_as_params(comp, page.nodes[inst])
        _open_sizes(comp)
        moved.update(dict.fromkeys(ids, inst))
        made.append((inst, name, op))
    made.reverse()
    _share_definitions(project, page, made, lambda group, shared: (
        f"The ONNX {group[0][2]} node{'s' if shared else ''} {', '.join(i for i, _n, _k in group)} of the model "
        f"{os.path.basename(str(source))}, as blockflow blocks (one node, one block on the page). Its "
        f"parameters are the first values of its Variables: each instance gives its own, and Reset "
        f"gives them back."))
    _renumbered(project, page, made)
    return moved


def _renumbered(project, page, made) -> None:
    """The nodes' composites named by op in the order the model first uses them (Conv, Conv_2,
    ...), not by the order they were grouped in."""
    names = list(dict.fromkeys(composite_name(page.nodes[inst].block) for inst, _n, _k in made))
    ops = {composite_name(page.nodes[inst].block): op for inst, _n, op in made}
    for i, name in enumerate(names):        # out of the way first: a new name may be an old one
        rename_composite(project, name, f"_renaming_{i}")
    taken = set(project.composites)
    for i, name in enumerate(names):
        new = _free(_ident(ops[name]), taken)
        taken.add(new)
        rename_composite(project, f"_renaming_{i}", new)


def order_by_use(project, page) -> None:
    """List the composites (in the palette, in the file) in the order the page uses them, each
    before those it uses, not in the order they were grouped in."""
    order: dict = {}

    def visit(diagram):
        for node in diagram.nodes.values():
            name = composite_name(node.block)
            if name in project.composites and name not in order:
                order[name] = None
                visit(project.composites[name].page)
    visit(page)
    project.composites = {**{n: project.composites[n] for n in order}, **project.composites}


_NO_SEED = object()


def _seeds(page, ids) -> dict:
    return {nid: page.nodes[nid].attrs.get("seed", _NO_SEED) for nid in ids}


def _seeds_back(comp, seeds: dict) -> None:
    """The blocks' own seeds, which Group mixed with the instance's id (so that a page's random
    draws stay the same when it is regrouped): an import has no draws to keep (random ops are
    refused; Dropout at inference draws nothing), and per-instance seeds would keep alike units
    from sharing a definition."""
    for nid, seed in seeds.items():
        node = comp.page.nodes.get(nid)
        if node is None or composite_name(node.block) is not None:
            continue
        attrs = {k: v for k, v in node.attrs.items() if k != "seed"}
        if seed is not _NO_SEED:
            attrs["seed"] = seed
        node.attrs = attrs


def _renamed_instance(page, inst: str, want: str) -> str:
    if want != inst and page.rename_problem(inst, want) == "":
        page.rename_node(inst, want)
        return want
    return inst


def units_as_composites(project, page, registry, program, source: str) -> int:
    """Make each framed unit of the imported ``page`` an instance of a composite (``program``: the
    page compiled, for the ports' types); the number of units made instances."""
    units = [f for f in page.frames if f.title != LOSS_FRAME]
    made = []
    # last unit first: a unit's Inputs are typed from the blocks feeding it, which the program
    # knows by their ids until they are grouped in turn
    keys = {f.title for f in units}
    types = _TypesOnly(program)
    for frame in reversed(units):
        unit = _group(project, page, frame, registry, types, keys)
        if unit is not None:
            made.append(unit)
    made.reverse()
    _share_definitions(project, page, made, lambda group, shared: (
        f"The unit{'s' if shared else ''} {', '.join(k for _i, _n, k in group)} of the ONNX model "
        f"{os.path.basename(str(source))}, made a composite by the import"
        f"{' (one definition: they differ only in their weights)' if shared else ''}. Its parameters are "
        f"the first values of its Variables: each instance gives its own weights, and Reset gives them back."))
    return len(made)


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
    seeds = _seeds(page, ids)
    restructure(project, plan)
    _seeds_back(project.composites[name], seeds)
    page.frames = [f for f in page.frames if f is not frame and f.blocks != frame.blocks]
    comp = project.composites[name]
    comp.page.frames = []        # the unit's own frame: the definition is the unit
    inst = _renamed_instance(page, plan.focus, _ident(key))
    _drop_unit_name(page, inst, comp, key, keys - {key})
    _weights_as_params(comp, page.nodes[inst])
    _open_sizes(comp)
    return inst, name, key


def _drop_unit_name(page, inst: str, comp, key: str, others: set, last_segment: bool = False) -> None:
    """Inner ids, labels and port names without the unit's name: ``res3_1_branch2a`` ->
    ``branch2a`` (a port renamed, the page's wires to the instance ``inst`` follow it). A block
    named after another unit (``others``: a branch without weights, named after what it reads)
    is named after its op instead. ``last_segment``: a name in a scope (``u1.W``, a node's weight
    named in its unit) keeps its last part."""
    instance = page.nodes[inst]
    is_port = {nid: n.block in (INPUT_BLOCK, OUTPUT_BLOCK) for nid, n in comp.page.nodes.items()}
    blocks = [nid for nid, port in is_port.items() if not port]
    wanted = {}
    for nid in blocks:
        node = comp.page.nodes[nid]
        new = _inner(nid, key)
        if new == nid and last_segment and "." in nid and nid != key:   # a weight named in its unit
            new = _inner(nid, nid.rsplit(".", 1)[0])
        if new == nid and (nid == key or any(_inner(nid, k) != nid for k in others)):
            new = re.sub(r"_\d+$", "", composite_name(node.block) or node.block).lower()
        wanted[nid] = new
        node.label = _inner(node.label, key) if node.label.startswith(key) else node.label
    # In two steps, so that a name one block gives up is free for another, and a name two want
    # (or a port has) goes to the first in the page's order: alike units get alike names
    for i, nid in enumerate(blocks):
        comp.page.rename_node(nid, f"_renaming_{i}")
    taken = {nid for nid, port in is_port.items() if port}
    for i, nid in enumerate(blocks):
        new = _free(wanted[nid], taken) if valid_node_id(wanted[nid]) else _free(nid, taken)
        taken.add(new)
        comp.page.rename_node(f"_renaming_{i}", new)
        if new != nid:
            instance.state = {_renamed_key(k, nid, new): v for k, v in instance.state.items()}
    _variables_named_by_reader(comp, instance)
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


def _variables_named_by_reader(comp, instance) -> None:
    """A Variable with a name that says nothing (``r217``, a value an exporter numbered) is named
    after the block and port that read it (``_1x1.bn.sc_y``): two units alike then have their
    weights under the same names, and share a definition."""
    readers = defaultdict(list)
    for e in comp.page.edges:
        readers[e.src].append(e)
    for nid in list(comp.page.nodes):
        if comp.page.nodes[nid].block != "Variable" or not is_numbered(nid) or len(readers[nid]) != 1:
            continue
        (e,) = readers[nid]
        new = _free(f"{e.dst}_{split_port(e.dst_port)[0]}", comp.page.nodes)
        if comp.page.rename_problem(nid, new) == "":
            comp.page.rename_node(nid, new)
            instance.state = {_renamed_key(k, nid, new): v for k, v in instance.state.items()}


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
            if rest.isdigit():      # softmax_2 less softmax: a number says nothing
                return text
            for out in (rest, "_" + rest):     # Inception's 1x1 becomes _1x1: an id starts with a letter or _
                if valid_node_id(out):
                    return out
    return text


def _renamed_key(state_key: str, old: str, new: str) -> str:
    for sep in (":", "/"):
        if state_key.startswith(old + sep):
            return new + state_key[len(old):]
    return state_key


def _open_sizes(comp) -> None:
    """The composite's Inputs take any size (their rank and dtype kept): a definition shared by
    instances fed different sizes (each 1x1 Conv of a model, whatever its channels)."""
    for node in comp.page.nodes.values():
        shape = node.attrs.get("shape")
        if node.block == INPUT_BLOCK and isinstance(shape, list):
            node.attrs = {**node.attrs, "shape": [-1] * len(shape)}


def _weights_as_params(comp, instance) -> None:
    """Each Variable holding its imported value reads it from a tensor parameter instead, which
    the instance gives: the definition no longer holds one unit's weights."""
    taken = {p.name for p in comp.params}
    for nid, node in comp.page.nodes.items():
        if composite_name(node.block) is not None:     # a node's composite: its weights pass through
            for key, value in list(node.attrs.items()):
                if isinstance(value, np.ndarray):
                    pname = _free(re.sub(r"\W", "_", f"{nid}_{key}"), taken)
                    taken.add(pname)
                    comp.params.append(Attr(pname, "tensor", None, doc=f"the {key} of {nid}"))
                    node.attrs = {**node.attrs, key: {PARAM_REF: pname}}
                    instance.attrs = {**instance.attrs, pname: value}
            continue
        value = node.attrs.get("initial_value")
        if node.block != "Variable" or node.attrs.get("initializer") != "value" or not isinstance(value, np.ndarray):
            continue
        pname = _free(re.sub(r"\W", "_", nid), taken)
        taken.add(pname)
        comp.params.append(Attr(pname, "tensor", None, doc=f"the first value of the Variable {nid}"))
        # the group mixed a seed into the attrs per instance; a value given makes it unused, and
        # its shape (the instances' shapes may differ: one Conv definition for every 1x1 conv)
        attrs = {k: v for k, v in node.attrs.items() if k not in ("seed", "shape")}
        attrs["initial_value"] = {PARAM_REF: pname}
        node.attrs = attrs
        instance.attrs = {**instance.attrs, pname: value}


def _share_definitions(project, page, made, describe) -> None:
    """Groups whose definitions are equal share the first one's, named after what their keys
    share (``res3`` for res3_1 .. res3_3, ``Conv`` for Conv nodes); ``describe(group, shared)``
    writes each composite's note from its [(instance, name, key)]."""
    alike = defaultdict(list)
    for inst, name, key in made:
        alike[_signature(project.composites[name])].append((inst, name, key))
    for group in alike.values():
        (_inst0, name0, key0), rest = group[0], group[1:]
        comp = project.composites[name0]
        if rest:
            del project.composites[name0]
            for _inst, name, _key in rest:
                del project.composites[name]
            # named after what the keys share (res for res2_1 .. res5_1), else, that name taken by
            # another kind, after the first (res3_0 for res3_0, res4_0, res5_0)
            stem = _stem([k for _i, _n, k in group])
            shared = stem if stem and stem not in project.composites else _free(_ident(key0), project.composites)
            comp.name, comp.page.name = shared, block_name(shared)
            project.composites[shared] = comp
            for inst, _name, _key in group:
                page.nodes[inst].block = block_name(shared)
        comp.doc = describe(group, bool(rest))


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
