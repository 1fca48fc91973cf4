"""The named dimensions of composites' ports: the sizes an instance's Inputs bind them to, and
the attrs of the blocks inside that use them (``{"$dim": "features"}``, a DimRef once flattened),
resolved when those blocks are typed (infer.py asks; flatten.py made the DimRefs).
"""
from __future__ import annotations

from blockflow.spec import ShapeError, TensorType

__all__ = ["Dimensions"]


class Dimensions:
    """The sizes each instance's named dimensions are bound to by its Inputs' types."""

    def __init__(self, binders: dict, report, page=None):
        self.binders, self.report, self.page = binders, report, page
        self.sizes: dict[tuple[str, str], tuple] = {}   # (instance, name) -> (size or None, port)

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
