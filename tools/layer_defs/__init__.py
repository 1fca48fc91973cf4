"""The layer library's definitions, one module per family (basic.py, sequence.py, ...).

Each module has ``LAYERS``: a list of functions that build one layer each, a
:class:`~blockflow.composite.Composite` whose ``origin`` is ``{"library": "blockflow", "name":
its name, "version": an int}`` (bump the version whenever the definition changes). A builder may
carry a ``category`` attribute (kit.py's ``@layer(category, version)`` sets both; without one the
layer is listed under "other"). tools/make_layers.py writes each to blocks/layers/NAME.bflow.json
with the composites it uses; no module needs to know the others.
"""
