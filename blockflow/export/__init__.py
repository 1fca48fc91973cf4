"""Export: a compiled page as code for other engines (docs/export.md).

``torch_module.py`` writes a standalone PyTorch module (each block lowered by the table in
``torch_lowering.py``, filled by the ``torch_ops_*`` modules); the ONNX writer is in ``onnx_*``.
Nothing from a project reaches generated code except through ``names.py``: identifiers checked
against a strict pattern, and values written as escaped literals.
"""
