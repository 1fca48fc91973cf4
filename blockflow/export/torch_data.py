"""The data an exported page trains on: its dataset block's rows and its Placeholders' saved feeds.

blockflow gives a dataset block's batch ``k`` as rows of its whole table (blocks/data_ops.py:
a seeded train/test split, then consecutive batches of the train part, reshuffled every epoch
with a numpy generator keyed by the block's seed, the epoch and the run's seed). The export keeps
that exactly: the whole table (every row, as split "all" gives it: generated, read from the
file, or scikit-learn's, scaled as the block scales it) is written beside the module
(``NAME_data.pt``), and train.py's sampler picks batch ``k``'s rows with the same numpy
formulas (torch_train.py). :func:`blockflow_batch` is blockflow's own batch, which the PyTorch
engine (torch_engine.py) feeds the module.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from blockflow.compile.program import Program
from blockflow.datafiles import DataRequest
from blockflow.errors import BlockExecutionError
from blockflow.export.torch_module import ExportError, TorchExport
from blockflow.project import split_port_text
from blockflow.spec import ShapeError

__all__ = ["PageData", "page_data", "blockflow_batch", "fixed_feeds"]

#: the attrs of a dataset block that fix which rows batch k takes
BATCH_ATTRS = ("batch_size", "test_fraction", "shuffle", "seed")


@dataclass
class PageData:
    """The forward arguments' values: ``rows`` (argument -> the dataset block's whole table, one
    example per row) and ``fixed`` (argument -> a Placeholder's saved feed, the same every step);
    ``batching`` the dataset block's attrs that pick batch k (None without a dataset block)."""

    rows: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    batching: dict | None = None
    dataset: str | None = None
    #: a CsvDataset's or NumpyDataset's file and how to read it (train.py reads it itself)
    source: dict | None = None
    #: the project's folder (where ``source``'s path starts)
    folder: str | None = None
    #: argument in ``rows`` -> the dataset block's output port it is
    ports: dict = field(default_factory=dict)

    @property
    def examples(self) -> int:
        return len(next(iter(self.rows.values()))) if self.rows else 0


def _arg_nodes(export: TorchExport):
    for arg, text, _type in export.inputs:
        node, port = split_port_text(text)
        yield arg, node, port


def _dataset_steps(program: Program, export: TorchExport) -> list:
    nodes = {node for _, node, _ in _arg_nodes(export)}
    return [st for st in program.steps if st.spec.is_dataset and st.node in nodes]


def _outputs_of(program: Program, st, request: DataRequest) -> dict:
    """{port: array} the dataset block ``st`` gives for ``request`` (its own forward)."""
    extra = {}
    if "data" in st.spec.forward_context:
        extra["data"] = request
    if "files" in st.spec.forward_context:
        extra["files"] = program.files
    try:
        out = st.spec.forward(**st.attrs, **extra)
    except Exception as exc:    # as blockflow's runtime reports a block's failure (no test part...)
        msg = str(exc) if isinstance(exc, ShapeError) else f"{type(exc).__name__}: {exc}"
        raise BlockExecutionError(f"{program.full_name(st.node)} ({st.spec.name})", msg) from exc
    out = out if isinstance(out, tuple) else (out,)
    return {program.slot(o).port: np.asarray(v) for o, v in zip(st.outputs, out)}


def fixed_feeds(program: Program, export: TorchExport, feeds: dict | None = None) -> dict:
    """argument -> the Placeholder's feed (``feeds[node]``, else its saved one), in its dtype;
    ExportError naming the ones with none."""
    out, missing = {}, []
    feeds = feeds or {}
    for arg, node, _port in _arg_nodes(export):
        st = program.step(node)
        if st is None or st.role != "placeholder":
            continue
        value = feeds.get(node)
        if value is None:
            value = program.feeds.get(node)
        if value is None:
            missing.append(program.full_name(node))
            continue
        t = program.slot(st.outputs[0]).type
        out[arg] = np.asarray(value, dtype=t.dtype)
    if missing:
        raise ExportError(f"{len(missing)} Placeholder(s) of page '{program.page_name}' have no saved feed, "
                          f"which training feeds every step: {', '.join(missing)}", missing)
    return out


def page_data(program: Program, export: TorchExport) -> PageData:
    """The whole table of the page's dataset block and the saved feeds (see the module's doc)."""
    steps = _dataset_steps(program, export)
    if len(steps) > 1:
        names = [program.full_name(st.node) for st in steps]
        raise ExportError(f"page '{program.page_name}' reads {len(steps)} dataset blocks; a training script "
                          f"batches one: {', '.join(names)}", names)
    data = PageData(fixed=fixed_feeds(program, export))
    if steps:
        st = steps[0]
        values = _outputs_of(program, st, DataRequest(0, "all", 0))
        for arg, node, port in _arg_nodes(export):
            if node == st.node:
                data.ports[arg] = port or program.slot(st.outputs[0]).port
                data.rows[arg] = values[data.ports[arg]]
        data.batching = {k: st.attrs[k] for k in BATCH_ATTRS}
        data.dataset = st.node
        data.source = _file_source(st)
        if data.source is not None:
            data.folder = str(program.files.base_dir)
        lengths = {len(a) for a in data.rows.values()}
        if len(lengths) > 1:    # a label-less file gives no labels: nothing to batch them with
            raise ExportError(f"{program.full_name(st.node)} gives outputs of different lengths "
                              f"({sorted(lengths)} rows); a training script needs one row per example")
    return data


#: the attrs train.py needs to read a file dataset as the block does
_FILE_ATTRS = {"CsvDataset": ("path", "label", "label_format", "classes"),
               "NumpyDataset": ("path", "features_key", "labels_key", "label_format", "classes")}


def _file_source(st) -> dict | None:
    keys = _FILE_ATTRS.get(st.spec.name)
    if keys is None:
        return None
    return {"block": st.spec.name, **{k: st.attrs[k] for k in keys}}


def blockflow_batch(program: Program, export: TorchExport, step: int, seed: int = 0,
                    split: str = "train", feeds: dict | None = None) -> dict:
    """argument -> the value blockflow's run ``step`` with run seed ``seed`` gives it: the dataset
    blocks' batch (their own forward) and the Placeholders' saved feeds."""
    out = fixed_feeds(program, export, feeds)
    request = DataRequest(step, split, seed)
    for st in _dataset_steps(program, export):
        values = _outputs_of(program, st, request)
        for arg, node, port in _arg_nodes(export):
            if node == st.node:
                out[arg] = values[port or program.slot(st.outputs[0]).port]
    return out
