"""Writes the sample projects in sample_projects/ from their definitions here.

    python tools/make_samples.py          # rewrite every sample
    python tools/make_samples.py --check  # exit 1 if a committed sample differs (used by the tests)

The samples are committed as JSON so they read well in a diff and load without this script;
this script is how they are made, so that a format change rewrites them all the same way.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from blockflow.project import Page, Project
from blockflow.project_io import dumps_project

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_projects"

X = np.array([2.0, 1.0, 0.1, 3.0, -1.0], np.float32)
W = np.array([1.0, -2.0, 0.5, 3.0, 1.5], np.float32)


def _wire(page: Page, src: str, dst: str) -> None:
    (s, sp), (d, dp) = src.split("."), dst.split(".")
    page.connect(s, sp, d, dp)


def _inputs(page: Page, x=(0, 160)) -> None:
    page.add_node("Placeholder", id="x", attrs={"dtype": "float32", "shape": [5]}, position=x,
                  label="logits x")
    page.feeds["x"] = X.copy()


def _weighted_sum(page: Page, src: str, col: float) -> None:
    page.add_node("Const", id="w", attrs={"dtype": "float32", "value": W.copy()}, position=(col, 320),
                  label="weights w")
    page.add_node("Multiply", id="Multiply_1", position=(col + 200, 160))
    page.add_node("Sum", id="Sum_1", position=(col + 400, 160), label="loss")
    _wire(page, src, "Multiply_1.x")
    _wire(page, "w.output", "Multiply_1.y")
    _wire(page, "Multiply_1.z", "Sum_1.input")
    page.loss = "Sum_1"


def _shift(page: Page, stop: bool) -> str:
    """x - Max(x), through StopGradient when ``stop``; returns the difference's port."""
    _inputs(page)
    page.add_node("Max", id="Max_1", position=(200, 40))
    shift = "Max_1.output"
    if stop:
        page.add_node("StopGradient", id="StopGradient_1", position=(400, 40))
        _wire(page, "Max_1.output", "StopGradient_1.input")
        shift = "StopGradient_1.output"
    page.add_node("Subtract", id="Subtract_1", position=(600, 160))
    _wire(page, "x.output", "Max_1.input")
    _wire(page, "x.output", "Subtract_1.x")
    _wire(page, shift, "Subtract_1.y")
    return "Subtract_1.z"


def _exp_normalised(page: Page, src: str, col: float) -> str:
    """exp(src) / sum(exp(src)) from Exp, Sum and RealDiv; returns the quotient's port."""
    page.add_node("Exp", id="Exp_1", position=(col, 160))
    page.add_node("Sum", id="Sum_2", position=(col + 200, 40), label="normaliser")
    page.add_node("RealDiv", id="RealDiv_1", position=(col + 400, 160))
    _wire(page, src, "Exp_1.x")
    _wire(page, "Exp_1.y", "Sum_2.input")
    _wire(page, "Exp_1.y", "RealDiv_1.x")
    _wire(page, "Sum_2.output", "RealDiv_1.y")
    return "RealDiv_1.z"


def _softmax(page: Page, src: str) -> str:
    page.add_node("Softmax", id="Softmax_1", position=(800, 160))
    _wire(page, src, "Softmax_1.logits")
    return "Softmax_1.softmax"


def stable_softmax() -> Project:
    project = Project(metadata={
        "title": "Stable softmax",
        "description": "TensorFlow's stop_gradient example: softmax(x - stop_gradient(max(x))).",
    })

    page = project.add_page("stable_softmax")
    page.text = (
        "A numerically stable softmax, as the TensorFlow docs for stop_gradient write it: "
        "z = x - StopGradient(Max(x)), p = Softmax(z), loss = Sum(p * w). "
        "Subtracting the max keeps exp() from overflowing (try x around 1000). The max is only a "
        "shift: softmax does not change when a constant is subtracted, so its gradient would add "
        "nothing. StopGradient says so, and the backward pass skips Max entirely (blockflow run "
        "lists the wires into StopGradient as cut). The other pages write the softmax out by hand, drop "
        "the StopGradient (same gradient, more work) and drop the shift (overflows)."
    )
    _weighted_sum(page, _softmax(page, _shift(page, stop=True)), 1000)

    page = project.add_page("by_hand")
    page.text = ("The same softmax written out: exp(z) / sum(exp(z)) with z = x - StopGradient(Max(x)). "
                 "Stable for large x, and its gradient equals the Softmax block's.")
    _weighted_sum(page, _exp_normalised(page, _shift(page, stop=True), 800), 1400)

    page = project.add_page("without_stop_gradient")
    page.text = ("x - Max(x) with the gradient flowing through Max too. The result and the gradient are "
                 "the same (the max's share sums to zero), but the backward pass has to differentiate Max.")
    _weighted_sum(page, _softmax(page, _shift(page, stop=False)), 1000)

    page = project.add_page("naive")
    page.text = ("exp(x) / sum(exp(x)) with no shift: fine for small x, but exp overflows to Inf for "
                 "x around 100 in float32 and the result turns into NaN (try a feed of x near 1000).")
    _inputs(page)
    _weighted_sum(page, _exp_normalised(page, "x.output", 200), 800)
    return project


SAMPLE_BUILDERS = {"stable_softmax": stable_softmax}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare with the committed files")
    args = parser.parse_args(argv)
    stale = []
    for name, build in SAMPLE_BUILDERS.items():
        path = SAMPLES / f"{name}.bflow.json"
        text = dumps_project(build())
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("stale samples (run python tools/make_samples.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
