"""The export formats as one table, for every front end (``blockflow export``, the editor's
File > Export Model): each writes what the user named and returns the paths it wrote."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

__all__ = ["Format", "FORMATS", "export_files"]


@dataclass(frozen=True)
class Format:
    name: str
    title: str           # "PyTorch module"
    suffix: str          # what a file of it ends with
    needs: tuple         # the optional packages it imports
    write: Callable      # (project, page, path, outputs) -> [Path]


def _write_torch(project, page, path, outputs=None, registry=None):
    from blockflow.export.files import write_torch_files
    from blockflow.export.torch_module import export_torch

    return write_torch_files(export_torch(project, page, outputs=outputs, registry=registry), path)


def _write_onnx(project, page, path, outputs=None, registry=None):
    from blockflow.export.onnx_model import export_onnx, write_onnx_file

    return write_onnx_file(export_onnx(project, page, outputs=outputs, registry=registry), path)


FORMATS: dict[str, Format] = {
    "torch": Format("torch", "PyTorch module", ".py", ("torch",), _write_torch),
    "onnx": Format("onnx", "ONNX model", ".onnx", ("onnx",), _write_onnx),
}


def export_files(fmt: str, project, page, path, outputs=None, registry=None) -> list[Path]:
    """Write ``page`` of ``project`` to ``path`` in format ``fmt``; ExportError when the page
    cannot be exported, MissingPackage when an optional package it needs is not installed."""
    return FORMATS[fmt].write(project, page, path, outputs, registry)
