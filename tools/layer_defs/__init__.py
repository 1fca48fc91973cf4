"""The layer library's definitions: each module here has ``LAYERS``, a list of functions that
build one layer each (a :class:`~blockflow.composite.Composite` with its ``origin`` set), which
tools/make_layers.py writes to blocks/layers/NAME.bflow.json."""
