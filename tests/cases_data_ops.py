"""Test cases for the data_ops blocks (dataset sources: no inputs, batches by the run's step).

The shared tests call forward with ``data=DataRequest()`` (step 0 of the train split) and
``files=DataFiles(tests/data)``; tests/test_data_ops.py covers batching, splits and file errors.
"""
from __future__ import annotations

from casekit import Case

CASES: dict[str, list[Case]] = {
    "MakeMoons": [Case(attrs={"n": 50}, id="index"),
                  Case(attrs={"n": 20, "label_format": "onehot", "batch_size": 4}, id="onehot-batch")],
    "MakeSpirals": [Case(attrs={"n": 30, "classes": 3}, id="three-arms")],
    "MakeBlobs": [Case(attrs={"n": 40, "classes": 4, "dims": 3}, id="3d")],
    "MakeXor": [Case(id="table"), Case(attrs={"n": 40, "test_fraction": 0.25, "label_format": "onehot"}, id="noisy")],
    "MakeLine": [Case(attrs={"n": 10, "slope": 2.0}, id="line")],
    "MakeSine": [Case(attrs={"n": 16, "batch_size": 5}, id="batch")],
    "CsvDataset": [Case(attrs={"path": "points.csv", "classes": 3}, id="csv"),
                   Case(attrs={"path": "points.csv", "label_format": "value"}, id="csv-value")],
    "NumpyDataset": [Case(attrs={"path": "digits.npz", "classes": 3, "label_format": "onehot"}, id="npz"),
                     Case(attrs={"path": "features.npy", "labels_key": ""}, id="npy-features-only")],
    "PackageDataset": [Case(attrs={"batch_size": 16}, id="digits-rows"),
                       Case(attrs={"layout": "images", "batch_size": 8, "label_format": "onehot"}, id="digits-images"),
                       Case(attrs={"name": "iris", "scaling": "standard", "test_fraction": 0.3}, id="iris-standard")],
}

for _cases in CASES.values():       # sources of data: nothing to differentiate
    for _c in _cases:
        _c.grad = False

NOT_DIFFERENTIABLE = {name: "none" for name in CASES}
OPEN_SHAPES = set(CASES)     # the batch size is not part of the type
