"""The named dimensions of composites' ports: the sizes an instance's Inputs bind them to, and
the attrs of the blocks inside that use them (``{"$dim": "features"}``, a DimRef once flattened),
resolved when those blocks are typed (infer.py asks; flatten.py made the DimRefs).
"""
from __future__ import annotations

from blockflow.compile.attr_values import attrs_key, read_only
from blockflow.spec import AttrError, ShapeError, TensorType

__all__ = ["Dimensions"]


#: attrs whose value flatten.py makes differ from one instance's copy of a block to the next,
#: whatever the composite says: the seed, mixed with the copy's flat id
PER_INSTANCE = ("seed",)


class Dimensions:
    """The sizes each instance's named dimensions are bound to by its Inputs' types."""

    def __init__(self, binders: dict, report, page=None):
        self.binders, self.report, self.page = binders, report, page
        self.sizes: dict[tuple[str, str], tuple] = {}   # (instance, name) -> (size or None, port)
        #: (spec, attrs_key of resolved attrs less PER_INSTANCE) -> (checked dict, problems)
        self._checked: dict = {}

    def _declaring_port(self, instance: str, name: str) -> str | None:
        """The Input of ``instance`` whose declared shape names dimension ``name`` (None when
        none does): asked only when the dimension was not bound, to say why."""
        for flat, inst in self.binders.items():
            node = self.page.nodes.get(flat) if inst == instance and self.page is not None else None
            shape = node.attrs.get("shape") if node is not None else None
            if isinstance(shape, (list, tuple)) and name in shape:
                return node.attrs.get("name", flat)
        return None

    def bind(self, nid: str, attrs: dict, t: TensorType) -> None:
        instance, shape = self.binders[nid], attrs.get("shape")
        if shape is None or len(shape) != t.rank:
            return
        for want, got in zip(shape, t.shape):
            if not isinstance(want, str):
                continue
            key = (instance, want)
            if key not in self.sizes:
                self.sizes[key] = (got, attrs.get("name"))
                continue
            size, port = self.sizes[key]
            if size is None:
                self.sizes[key] = (got, attrs.get("name"))
            elif got is not None and got != size:
                self.report.error(nid, None, f"dimension '{want}' is {got} here but {size} at "
                                             f"'{port}' of the same instance")

    def checked_attrs(self, nid: str, spec, raw: dict) -> dict | None:
        """A node's attrs that name dimensions (``raw``), each dimension's size put in and checked
        as _check_blocks checks a drawn node's; None when a size is not known or a value does not
        fit (reported on the node).

        Each instance's copy of a block has attrs that differ from the other copies' only by its
        sizes and its seed (mixed with its flat id: flatten.py): what is left after the seed is
        checked once per content, and copies of equal sizes and no seed share one checked dict
        (which infer.py's look-ups key on), as equal drawn attrs do."""
        try:
            resolved = {k: self.resolve(v) for k, v in raw.items()}
        except ShapeError as exc:
            self.report.error(nid, None, str(exc))
            return None
        own = {k: resolved.pop(k) for k in PER_INSTANCE
               if k in resolved and k in spec.attr_map and not spec.attr_map[k].required}
        key = attrs_key(resolved)
        hit = None if key is None else self._checked.get((spec, key))
        if hit is None:
            values, problems = spec.validate_attrs(resolved)
            hit = {k: read_only(v) for k, v in values.items()}, problems
            if key is not None:
                self._checked[(spec, key)] = hit
        values, problems = hit
        if own:
            values, problems = dict(values), list(problems)
            for k, v in own.items():
                try:
                    values[k] = spec.check_attr(k, v)
                except AttrError as exc:
                    problems.append((k, f"attr '{k}': {exc}"))
        for _, problem in problems:
            self.report.error(nid, None, problem)
        return None if problems else values

    def resolve(self, value):
        # DimRefs are flatten.py's, which a compile imports only for a page that needs flattening,
        # and only such a page has attrs to resolve (infer.py's deferred nodes)
        from blockflow.compile.flatten import DimRef

        if isinstance(value, DimRef):
            found = self.sizes.get((value.instance, value.name))
            where = f"instance {value.instance}" if value.instance else "this composite"
            if found is None:
                port = self._declaring_port(value.instance, value.name)
                if port is not None:   # declared, but its Input was not typed: a problem upstream
                    raise ShapeError(f"the size of dimension '{value.name}' of {where} is not known: "
                                     f"its input '{port}' has no type (see the problem before it)")
                raise ShapeError(f"no input of {where} gives a dimension named '{value.name}'")
            if found[0] is None:
                raise ShapeError(f"the size of dimension '{value.name}' of {where} is not known "
                                 f"(input '{found[1]}' leaves it open)")
            return found[0]
        if isinstance(value, (list, tuple)):
            return [self.resolve(x) for x in value]
        return value
