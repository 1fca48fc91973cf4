"""Composite blocks in project files: the top-level ``"composites"`` list (format version 2).

Each entry: ``{"name", "doc", "origin", "params", "diagram"}``; ``params`` declare attrs
(``{"name", "kind", "default", "choices", "min", "max", "doc"}``, no ``default``: required);
``diagram`` holds ``text``, ``nodes`` and ``edges`` as a page does. What the reader checks the
writer checks too, so whatever is written loads back.
"""
from __future__ import annotations

from blockflow.composite import SHARE_ATTR, Composite, block_name, composite_name_problem, find_cycle
from blockflow.io import rules
from blockflow.io.checks import Invalid, check_name, check_object, check_text, describe, key_path
from blockflow.io.rules import COMPOSITE_KEYS, DIAGRAM_KEYS, ORIGIN_KEYS, PARAM_KEYS
from blockflow.io.values import decode_value, encode_value
from blockflow.spec import ATTR_KINDS, Attr, AttrError

__all__ = ["decode_composites", "encode_composites"]


def decode_composites(raw, where: str, decode_diagram) -> dict:
    """``{name: Composite}`` from the file's list; ``decode_diagram(obj, where, name)`` reads a
    diagram's nodes and edges (the reader's, shared with pages)."""
    if not isinstance(raw, list):
        raise Invalid(where, f"composites must be a list, found {describe(raw)}")
    if len(raw) > rules.MAX_COMPOSITES:
        raise Invalid(where, f"{len(raw):,} composites; the limit is {rules.MAX_COMPOSITES:,}")
    out: dict = {}
    for i, obj in enumerate(raw):
        cw = f"{where}[{i}]"
        check_object(obj, cw, "a composite", COMPOSITE_KEYS, ("name", "diagram"))
        name = obj["name"]
        nw = key_path(cw, "name")
        check_text(name, nw, "a composite name")
        problem = composite_name_problem(name)
        if problem:
            raise Invalid(nw, problem)
        if name in out:
            raise Invalid(nw, f"duplicate composite name '{name}' (also {where}[{list(out).index(name)}])")
        doc = check_text(obj.get("doc", ""), key_path(cw, "doc"), "the documentation")
        origin = _decode_origin(obj.get("origin"), key_path(cw, "origin"))
        params = _decode_params(obj.get("params", []), key_path(cw, "params"))
        dw = key_path(cw, "diagram")
        check_object(obj["diagram"], dw, "a diagram", DIAGRAM_KEYS)
        page = decode_diagram(obj["diagram"], dw, block_name(name))
        out[name] = Composite(name, doc, params, page, origin)
        raw[i] = None
    cycle = find_cycle(out)
    if cycle:
        raise Invalid(where, f"composite '{cycle[0]}' contains itself: {' > '.join(cycle)}")
    return out


def _decode_origin(obj, where: str):
    if obj is None:
        return None
    check_object(obj, where, "an origin", ORIGIN_KEYS, ORIGIN_KEYS)
    library = check_text(obj["library"], key_path(where, "library"), "a library name")
    name = check_text(obj["name"], key_path(where, "name"), "a layer name")
    version = obj["version"]
    if type(version) is not int or version < 1:
        raise Invalid(key_path(where, "version"), f"a version is a whole number from 1, found {describe(version)}")
    return {"library": library, "name": name, "version": version}


def _decode_params(raw, where: str) -> list:
    if not isinstance(raw, list):
        raise Invalid(where, f"params must be a list, found {describe(raw)}")
    params, names = [], set()
    for i, obj in enumerate(raw):
        pw = f"{where}[{i}]"
        check_object(obj, pw, "a parameter", PARAM_KEYS, ("name", "kind"))
        name = check_name(obj["name"], key_path(pw, "name"), "a parameter name")
        if not name.isidentifier() or name == SHARE_ATTR:
            raise Invalid(key_path(pw, "name"), f"a parameter name is a plain identifier other than "
                                                 f"'{SHARE_ATTR}', found {name!r}")
        if name in names:
            raise Invalid(key_path(pw, "name"), f"duplicate parameter '{name}'")
        names.add(name)
        kind = obj["kind"]
        if kind not in ATTR_KINDS:
            raise Invalid(key_path(pw, "kind"), f"unknown parameter kind {describe(kind)} "
                                                 f"(kinds: {', '.join(ATTR_KINDS)})")
        choices = obj.get("choices", [])
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise Invalid(key_path(pw, "choices"), "choices must be a list of strings")
        if ATTR_KINDS[kind].needs_choices and not choices:
            raise Invalid(key_path(pw, "choices"), f"a '{kind}' parameter needs its choices")
        bounds = {}
        for key in ("min", "max"):
            v = obj.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise Invalid(key_path(pw, key), f"{key} must be a number, found {describe(v)}")
            bounds[key] = v
        doc = check_text(obj.get("doc", ""), key_path(pw, "doc"), "the documentation")
        extra = {"choices": tuple(choices), "doc": doc, **bounds}
        if "default" in obj:
            default = decode_value(obj["default"], key_path(pw, "default"), arrays=True)
            attr = Attr(name, kind, default, **extra)
            if default is not None:
                try:
                    attr.validate(default)
                except AttrError as exc:
                    raise Invalid(key_path(pw, "default"), f"the default does not fit: {exc}") from None
        else:
            attr = Attr(name, kind, **extra)
        params.append(attr)
    return params


def encode_composites(composites: dict, where: str, encode_diagram) -> list:
    """The file's list for ``composites`` (checked as the reader checks it);
    ``encode_diagram(page, where)`` writes a diagram's nodes and edges."""
    if not isinstance(composites, dict):
        raise Invalid(where, f"composites must be a dict, found {describe(composites)}")
    out = []
    for i, (key, comp) in enumerate(composites.items()):
        cw = f"{where}[{i}]"
        if not isinstance(comp, Composite):
            raise Invalid(cw, f"expected a Composite, found {describe(comp)}")
        problem = composite_name_problem(comp.name) or (
            f"the composite stored under '{key}' is named '{comp.name}'" if key != comp.name else "")
        if problem:
            raise Invalid(key_path(cw, "name"), problem)
        if comp.page.name != comp.block:
            raise Invalid(key_path(cw, "diagram"), f"the diagram of '{comp.name}' is named "
                                                    f"'{comp.page.name}', not '{comp.block}'")
        entry = {"name": comp.name, "doc": check_text(comp.doc, key_path(cw, "doc"), "the documentation")}
        if comp.origin is not None:
            entry["origin"] = encode_value(dict(comp.origin), key_path(cw, "origin"), arrays=False)
            _decode_origin(dict(entry["origin"]), key_path(cw, "origin"))
        entry["params"] = [_encode_param(p, f"{key_path(cw, 'params')}[{j}]") for j, p in enumerate(comp.params)]
        entry["diagram"] = encode_diagram(comp.page, key_path(cw, "diagram"))
        out.append(entry)
    cycle = find_cycle(composites)
    if cycle:
        raise Invalid(where, f"composite '{cycle[0]}' contains itself: {' > '.join(cycle)}")
    return out


def _encode_param(p, where: str) -> dict:
    if not isinstance(p, Attr):
        raise Invalid(where, f"expected an Attr, found {describe(p)}")
    out = {"name": p.name, "kind": p.kind}
    if not p.required:
        out["default"] = encode_value(p.default, key_path(where, "default"), arrays=True)
    if p.choices:
        out["choices"] = list(p.choices)
    for key in ("min", "max"):
        if getattr(p, key) is not None:
            out[key] = getattr(p, key)
    if p.doc:
        out["doc"] = p.doc
    # what is written loads back: the reader's checks
    if not p.name.isidentifier() or p.name == SHARE_ATTR:
        raise Invalid(key_path(where, "name"), f"a parameter name is a plain identifier other than "
                                                f"'{SHARE_ATTR}', found {p.name!r}")
    if p.kind not in ATTR_KINDS:
        raise Invalid(key_path(where, "kind"), f"unknown parameter kind {p.kind!r}")
    if ATTR_KINDS[p.kind].needs_choices and not p.choices:
        raise Invalid(key_path(where, "choices"), f"a '{p.kind}' parameter needs its choices")
    if not p.required and p.default is not None:
        try:
            p.validate(p.default)
        except AttrError as exc:
            raise Invalid(key_path(where, "default"), f"the default does not fit: {exc}") from None
    return out
