"""Readable names for an imported model's nodes, from which block ids and frames are made.

Many exporters give nodes no names or generic ones (``n12``, ``r12``, ``Conv_3``), while the
model's parameters keep the layer's name (``fire2/squeeze1x1_w_0``). A node is named by its own
name when it says something, else by its first parameter's name less the parameter's suffix
(``fire2/squeeze1x1``), else after the node that made its first input, with its op added
(``fire2/squeeze1x1_relu``).
"""
from __future__ import annotations

import re
from collections import Counter

__all__ = ["node_names", "float_constants", "shared_prefix", "is_numbered"]

#: a name that says nothing about the layer: empty, or letters then a number (n12, r3, Conv_3)
_GENERIC = re.compile(r"^(?:[A-Za-z]{0,3}|[A-Z][A-Za-z]*_?)\d*$")
#: a parameter's suffix: _w_0, _b, _bn_s_0 (the _s_0), _weight, .bias, :0
_PARAM_TAIL = re.compile(r"(?:[_.](?:w|b|s|weight|bias|kernel|gamma|beta|scale|rm|riv|mean|var)\w{0,2}?)?(?:[_:]\d+)?$",
                         re.IGNORECASE)


#: a value's name an exporter numbered (r217, n12, Conv_3, 42), not one the model's author gave (W, b)
_NUMBERED = re.compile(r"^(?:[A-Za-z]{1,3}\d{2,}|[a-z]\d|[A-Z][A-Za-z]*_\d+|\d+)$")


def is_numbered(name: str) -> bool:
    """Whether ``name`` (its last scope) is a number an exporter gave rather than a name."""
    return bool(_NUMBERED.match(name.rsplit("/", 1)[-1].rsplit(".", 1)[-1]))


def _param_stem(name: str) -> str:
    stem = _PARAM_TAIL.sub("", name)
    return stem or name


def node_names(model, params: set) -> tuple[list[str], list[str]]:
    """One name per node of ``model`` (index order), and the layer each belongs to (its stem:
    the name without the ops added after the layer's own); ``params``: the value names that are
    parameters ({value name: the name it is known by}, float_constants)."""
    made_by: dict[str, int] = {}
    names: list[str] = []
    stems: list[str] = []    # the layer a node belongs to, without the ops added after it
    for node in model.nodes:
        own = node.name
        if own and not _GENERIC.match(own.rsplit("/", 1)[-1]):
            name = stem = own
        else:
            first_param = next((params[i] for i in node.inputs if i in params), None)
            if first_param is not None:
                name = stem = _param_stem(first_param)
            else:
                src = next((made_by[i] for i in node.inputs if i in made_by), None)
                stem = stems[src] if src is not None else (own or node.op.lower())
                name = f"{stem}_{node.op.lower()}" if src is not None else stem
        names.append(name)
        stems.append(stem)
        for o in node.outputs:
            if o:
                made_by[o] = node.index
    return names, stems


def float_constants(model, foldable) -> dict:
    """{value name: the name it is known by} of the float constants before anything runs: float
    initializers, and the float outputs of ``foldable`` ops whose inputs are all constants (a
    weight made by ConstantOfShape). A folded value with a generic name (``r2``) is known by the
    constant it was made from."""
    known = set(model.initializers)
    floats = {k: k for k, v in model.initializers.items() if v.dtype.kind == "f"}
    for node in model.nodes:
        if node.op in foldable and not node.domain and all(i in known for i in node.inputs if i):
            source = next((floats[i] for i in node.inputs if i in floats), None)
            for o in node.outputs:
                if o:
                    known.add(o)
                    info = model.types.get(o)
                    if info is not None and info.dtype is not None and info.dtype.kind == "f":
                        generic = _GENERIC.match(o.rsplit("/", 1)[-1])
                        floats[o] = source if source and generic else o
    return floats


def shared_prefix(names: list[str]) -> str:
    """A first scope nearly every name has (caffe2's ``gpu_0/``; a few helper values may lack
    it), to leave out of ids and frames."""
    scoped = [n.split("/", 1)[0] + "/" for n in names if "/" in n]
    if not scoped:
        return ""
    first, count = Counter(scoped).most_common(1)[0]
    return first if count >= 0.8 * len(names) else ""
