"""The block lists of docs/export.md's ONNX section, made from the lowering table so they cannot
go stale (tests/test_export_onnx.py compares them with the committed page)."""
from __future__ import annotations

from blockflow.export.onnx_lowering import onnx_lowering_table
from blockflow.registry import Registry

__all__ = ["onnx_blocks_markdown", "REFUSED", "PASSED", "USE_LIMITS", "BEGIN", "END"]

BEGIN = "<!-- onnx-blocks: begin (made by blockflow.export.onnx_docs.onnx_blocks_markdown) -->"
END = "<!-- onnx-blocks: end -->"

_RANDOM = ("blockflow draws from its own seeded generator; ONNX's random ops draw other numbers, "
           "so the model could never equal blockflow's run")
_STATE = "changes a Variable: training, not inference (left out unless an asked output needs it)"

#: blocks that become a graph input or an initializer, not a node
PASSED = {
    "Placeholder": "a graph input", "Variable": "an initializer (the value blockflow starts from)",
    "Input": "a composite's input: the composite is flattened", "Output": "a composite's output: flattened",
    "CsvDataset": "its outputs are graph inputs", "NumpyDataset": "its outputs are graph inputs",
    "PackageDataset": "its outputs are graph inputs", "MakeBlobs": "its outputs are graph inputs",
    "MakeLine": "its outputs are graph inputs", "MakeMoons": "its outputs are graph inputs",
    "MakeSine": "its outputs are graph inputs", "MakeSpirals": "its outputs are graph inputs",
    "MakeXor": "its outputs are graph inputs",
}

#: blocks with no ONNX counterpart, and why
REFUSED = {
    "Bernoulli": _RANDOM, "Multinomial": _RANDOM, "RandomGamma": _RANDOM, "RandomNormal": _RANDOM,
    "RandomPoisson": _RANDOM, "RandomShuffle": _RANDOM, "RandomUniform": _RANDOM, "TruncatedNormal": _RANDOM,
    "ApplyAdadelta": _STATE, "ApplyAdagrad": _STATE, "ApplyAdam": _STATE, "ApplyFtrl": _STATE,
    "ApplyGradientDescent": _STATE, "ApplyMomentum": _STATE, "ApplyRMSProp": _STATE,
    "Assign": _STATE, "AssignAdd": _STATE, "AssignSub": _STATE,
    "Gradients": "differentiates: an ONNX model is the forward pass only",
}

#: lowered blocks some of whose uses are refused (the lowering names the reason at export)
USE_LIMITS = {
    "Dropout": "with `training` on and a rate above 0 (a random mask; drive Dropout by LearningPhase)",
    "MaxPool": "of 64-bit integers (ONNX pools floats; smaller integers go through float64 exactly)",
    "Cumprod": "along an axis of open size or longer than 1024 (unrolled: ONNX has no running product)",
    "Pow": "of integers (blockflow refuses a negative power, ONNX does not)",
    "Prod": "of integers along an axis of open size or longer than 1024 (unrolled: ONNX Runtime's ReduceProd "
            "saturates where blockflow's product wraps around)",
    "Diag": "of an open shape", "DiagPart": "of an open shape",
    "ScatterNd": "of float16 updates (ONNX Runtime's CPU ScatterND cannot add them)",
    "Conv2D": "with a filter of open height or width",
    "Conv2DBackpropInput": "with a filter or out_backprop of open height or width",
    "Where": "of a 0-d condition",
}

#: ops ONNX Runtime's CPU provider runs in float32 but not float64 (a float64 model using them
#: is valid ONNX, which that runtime refuses to load), and the blocks that lower to them
FLOAT32_ONLY_OPS = {"Conv": ("Conv2D",), "ConvTranspose": ("Conv2DBackpropInput",), "AveragePool": ("AvgPool",),
                    "Erf": ("Erf", "Gelu", "Activation (gelu)"), "Tan": ("Tan",), "Asin": ("Asin",),
                    "Acos": ("Acos",), "Atan": ("Atan",), "Sinh": ("Sinh",), "Cosh": ("Cosh",), "LRN": ("LRN",)}


def onnx_blocks_markdown(registry: Registry) -> str:
    """The ONNX section's block lists: lowered, passed through, refused (with the reason), and
    the uses of lowered blocks that are refused."""
    table = onnx_lowering_table()
    names = sorted(registry.names())
    lowered = [n for n in names if n in table]
    passed = [n for n in names if n not in table and n in PASSED]
    refused = [n for n in names if n not in table and n not in PASSED]
    lines = [BEGIN, "",
             f"**{len(lowered)} blocks have an ONNX lowering**, {len(passed)} become graph inputs or "
             f"initializers, {len(refused)} are refused.", "",
             "Lowered: " + ", ".join(f"`{n}`" for n in lowered) + ".", "",
             "| passed through | as |", "|---|---|"]
    lines += [f"| `{n}` | {PASSED[n]} |" for n in passed]
    lines += ["", "| refused | why |", "|---|---|"]
    lines += [f"| `{n}` | {REFUSED.get(n, 'no ONNX lowering yet')} |" for n in refused]
    lines += ["", "| lowered, but refused when used | |", "|---|---|"]
    lines += [f"| `{n}` | {USE_LIMITS[n]} |" for n in sorted(USE_LIMITS) if n in table]
    lines += ["", "| ONNX Runtime (CPU) has no float64 kernel for | used by |", "|---|---|"]
    lines += [f"| {op} | {', '.join(blocks)} |" for op, blocks in sorted(FLOAT32_ONLY_OPS.items())]
    lines += ["", END]
    return "\n".join(lines) + "\n"


def updated_doc(text: str, registry: Registry) -> str:
    """``text`` (docs/export.md) with its block lists replaced by the current ones."""
    head, found, rest = text.partition(BEGIN)
    if not found or END not in rest:
        raise ValueError("docs/export.md has no ONNX block lists (the onnx-blocks markers)")
    return head + onnx_blocks_markdown(registry).rstrip("\n") + rest.partition(END)[2]


if __name__ == "__main__":   # python -m blockflow.export.onnx_docs docs/export.md: rewrite the lists
    import sys
    from pathlib import Path

    from blockflow.registry import default_registry

    target = Path(sys.argv[1])
    target.write_text(updated_doc(target.read_text(encoding="utf-8"), default_registry()), encoding="utf-8")
