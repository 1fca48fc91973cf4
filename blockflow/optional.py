"""The optional packages (torch, onnx, onnxruntime): importing one, or saying how to install it.

The editor and the command line work without them; the export and the ONNX import need them and
raise :class:`MissingPackage`, whose message is the install command, when one is absent.

Imports nothing of blockflow.
"""
from __future__ import annotations

import importlib

__all__ = ["INSTALL", "MissingPackage", "need"]

#: package -> the command that installs it with the extra that carries it
INSTALL = {"torch": "pip install 'blockflow[torch]'", "onnx": "pip install 'blockflow[onnx]'",
           "onnxruntime": "pip install 'blockflow[onnx]'"}


class MissingPackage(ImportError):
    """An optional package is not installed; the message says how to install it."""


def need(package: str):
    """Import the optional ``package`` or raise MissingPackage naming the install command."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise MissingPackage(f"this needs {package}, which is not installed: "
                             f"{INSTALL.get(package, 'pip install ' + package)}") from None
