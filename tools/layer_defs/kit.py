"""What the layer definitions share: a layer's Composite with its origin, and a small builder
that lays out a diagram left to right as blocks are added."""
from __future__ import annotations

from blockflow.composite import Composite
from blockflow.spec import Attr

LIBRARY = "blockflow"
#: the kernel initializers a layer offers (the Variable block's random ones, and zeros/ones)
INITIALIZERS = ("glorot_uniform", "glorot_normal", "random_normal", "random_uniform", "zeros", "ones")


def param(name: str, kind: str = "$param") -> dict:
    """A reference to parameter ``name`` (or, with kind "$dim", to a named input dimension)."""
    return {kind: name}


def dim(name: str) -> dict:
    return {"$dim": name}


def layer(category: str, version: int):
    """Mark a builder with its category and version; the version goes into the origin of the
    Composite it builds (bump it whenever the definition changes)."""
    def mark(fn):
        fn.category, fn.version = category, version
        return fn
    return mark


def new_layer(fn, name: str, doc: str, params: list[Attr]) -> "Diagram":
    comp = Composite(name, doc=doc, params=list(params),
                     origin={"library": LIBRARY, "name": name, "version": fn.version})
    return Diagram(comp)


#: the grid the diagrams are drawn on (a block's position is column · DX, row · DY)
DX, DY = 200.0, 120.0


class Diagram:
    """Adds blocks to a composite's page at grid cells ``at=(column, row)``."""

    def __init__(self, comp: Composite):
        self.comp, self.page = comp, comp.page

    def add(self, block: str, id: str, at, attrs: dict | None = None, inputs: dict | None = None,
            label: str = "") -> str:
        col, row = at
        self.page.add_node(block, id=id, attrs=attrs, inputs=inputs, label=label,
                           position=(40 + DX * col, 40 + DY * row))
        return id

    def input(self, name: str, shape, dtype: str = "float32", doc: str = "", at=(0, 0)) -> str:
        return self.add("Input", name, at, {"name": name, "dtype": dtype, "shape": shape, "doc": doc})

    def output(self, src: str, at, name: str = "y", doc: str = "", shape=None, dtype: str = "float32") -> str:
        """An Output port, its dtype and shape checked (``shape`` None: any)."""
        self.add("Output", name, at, {"name": name, "dtype": dtype, "shape": shape, "doc": doc})
        self.wire(src, f"{name}.input")
        return name

    def wire(self, src: str, dst: str) -> None:
        """``src``/``dst`` are ``node.port``."""
        (s, sp), (d, dp) = src.split(".", 1), dst.split(".", 1)
        self.page.connect(s, sp, d, dp)
