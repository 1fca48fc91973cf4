"""Models from other tools made into blockflow projects: the ONNX import (docs/import.md)."""
