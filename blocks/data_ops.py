"""data_ops: datasets on the canvas. Each block is a source of (features, labels) batches.

A dataset block holds a whole dataset (generated from its attrs and seed, or read from a file next
to the project) split once into a train part and a test part (``test_fraction``, a seeded
split). What it outputs depends on the run (the ``data`` context the runtime hands to
``forward``):

- a training step ``k`` (split "train") gets batch ``k``: with ``batch_size`` 0 the whole train
  part, else consecutive batches of the train part, reshuffled every epoch (seeded) when
  ``shuffle`` is on; the last batch of an epoch may be smaller;
- an evaluation run (split "test") gets the whole test part; split "all" gets every row.

The batch size is not part of the wire's type (``[?, features]``), as in TF's datasets. Labels are
class indices (int32, ``[?]``) or one-hot rows (float32, ``[?, classes]``) for the classifiers, and
a float column ``[?, 1]`` for the regression sets (a noisy line, a sine wave).

File datasets read ``.csv`` (a header row naming the columns) or ``.npy``/``.npz`` (loaded without
pickle) through the ``files`` context: paths are relative to the project's folder and may not
leave it (the runtime resolves and checks them, and caches what it read).

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from blockflow.spec import Attr, Output, ShapeError, TensorType, block, reserve

_SEED = Attr("seed", "int", 0, min=0, doc="fixes the generated points and the train/test split")
_N = Attr("n", "int", 200, min=1, max=10_000_000, doc="number of examples")
_NOISE = Attr("noise", "float", 0.1, min=0.0, doc="standard deviation of the Gaussian noise added")
_BATCH = Attr("batch_size", "int", 0, min=0, doc="examples per training batch (0: the whole train part)")
_TEST = Attr("test_fraction", "float", 0.2, min=0.0, max=0.9,
             doc="share of the examples held out for evaluation (split 'test')")
_SHUFFLE = Attr("shuffle", "bool", True, doc="reshuffle the train part every epoch (seeded)")
_LABELS = Attr("label_format", "choice", "index", choices=("index", "onehot"),
               doc="class indices (int32, [?]) or one-hot rows (float32, [?, classes])")
_COMMON = (_BATCH, _TEST, _SHUFFLE, _SEED)


def _features():
    return Output("features", doc="a batch of examples, one per row")


def _targets(doc="the batch's labels"):
    return Output("labels", doc=doc)


# ------------------------------------------------------------------------------- batching
def _split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the train and test parts: a seeded permutation, the test part its head."""
    order = np.random.default_rng([seed, 0x5EED]).permutation(n)
    n_test = int(round(n * test_fraction))
    if test_fraction > 0 and n_test == 0 and n > 1:
        n_test = 1
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def _rows(n: int, data, *, batch_size: int, test_fraction: float, shuffle: bool, seed: int,
          who: str) -> np.ndarray:
    """The row indices a run gets (see the module docstring)."""
    if n == 0:      # an empty file: no split of it has examples, whatever test_fraction is
        raise ValueError(f"{who}: its data has no examples (0 rows)")
    # 8 bytes a row, twice (the permutation, then its sorted parts): six times a float32 column's
    # data, which was all the budget saw of a 60 MB file while the run held 400 MB
    reserve((2 * n,), np.int64, f"{who}'s order of its {n:,} examples")
    train, test = _split(n, test_fraction, seed)
    split = getattr(data, "split", "train")
    step = int(getattr(data, "step", 0))
    if split == "all":
        reserve((n,), np.int64, f"{who}'s rows")
        return np.arange(n)
    if split == "test":
        if test.size == 0:
            raise ValueError(f"{who} has no test part (test_fraction is 0)")
        return test
    if split != "train":
        raise ValueError(f"{who}: unknown split {split!r} (train, test, all)")
    if train.size == 0:
        raise ValueError(f"{who} has no training examples left after the test part")
    if batch_size <= 0 or batch_size >= train.size:
        return train
    per_epoch = math.ceil(train.size / batch_size)
    epoch, b = divmod(step, per_epoch)
    # a run's seed may be any whole number (a Trainer's seed=-1); numpy's seeds are not negative
    key = [seed, epoch, 1] + ([int(data.seed) % 2 ** 64] if getattr(data, "seed", 0) else [])
    reserve((train.size,), np.int64, f"{who}'s order of an epoch")
    order = np.random.default_rng(key).permutation(train.size) if shuffle else np.arange(train.size)
    return train[order[b * batch_size:(b + 1) * batch_size]]


def _taken(a: np.ndarray, rows: np.ndarray, what: str) -> np.ndarray:
    """``a[rows]``, reserved first: how many rows a run takes depends on the data and the split,
    so the runtime cannot check a dataset block's outputs before it runs."""
    reserve((len(rows),) + a.shape[1:], a.dtype, what)
    return a[rows]


def _classes_out(y: np.ndarray, classes: int, label_format: str):
    if label_format == "onehot":
        reserve((y.size, classes), np.float32, "the one-hot labels")
        out = np.zeros((y.size, classes), np.float32)
        out[np.arange(y.size), y] = 1.0
        return out
    return y.astype(np.int32)


def _class_types(d: int, classes: int, label_format: str):
    y = TensorType((None,), "int32") if label_format == "index" else TensorType((None, classes), "float32")
    return TensorType((None, d), "float32"), y


# ------------------------------------------------------------------------------- generators
def _generating(name: str, shape) -> None:
    """Reserve what a generator makes at once: its points and their noise, in float64."""
    reserve(shape, np.float64, f"{name}'s generated points (float64)")
    reserve(shape, np.float64, f"{name}'s generated noise (float64)")


@lru_cache(maxsize=32)
def _moons(n, noise, seed):
    _generating("MakeMoons", (n, 2))
    rng = np.random.default_rng(seed)
    n0 = n // 2
    t0 = np.linspace(0, math.pi, n0)
    t1 = np.linspace(0, math.pi, n - n0)
    x = np.concatenate([np.stack([np.cos(t0), np.sin(t0)], 1),
                        np.stack([1 - np.cos(t1), 0.5 - np.sin(t1)], 1)])
    y = np.concatenate([np.zeros(n0, np.int64), np.ones(n - n0, np.int64)])
    x = x + rng.normal(0, noise, x.shape)
    return _frozen(x.astype(np.float32)), _frozen(y)


@lru_cache(maxsize=32)
def _spirals(n, noise, classes, turns, seed):
    _generating("MakeSpirals", (n, 2))
    rng = np.random.default_rng(seed)
    k = np.arange(n) % classes
    t = np.concatenate([np.linspace(0.05, 1, int((k == c).sum())) for c in range(classes)])
    k = np.sort(k)
    angle = 2 * math.pi * turns * t + 2 * math.pi * k / classes
    x = np.stack([t * np.cos(angle), t * np.sin(angle)], 1) + rng.normal(0, noise, (n, 2))
    return _frozen(x.astype(np.float32)), _frozen(k.astype(np.int64))


@lru_cache(maxsize=32)
def _blobs(n, classes, features, spread, seed):
    _generating("MakeBlobs", (n, features))
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-5, 5, (classes, features))
    k = np.sort(np.arange(n) % classes)
    x = centres[k] + rng.normal(0, spread, (n, features))
    return _frozen(x.astype(np.float32)), _frozen(k.astype(np.int64))


@lru_cache(maxsize=32)
def _xor(n, noise, seed):
    _generating("MakeXor", (n, 2))
    corners = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float64)
    k = np.arange(n) % 4
    x = corners[k]
    if n > 4:
        x = x + np.random.default_rng(seed).normal(0, noise, x.shape)
    y = np.array([0, 1, 1, 0])[k]
    return _frozen(x.astype(np.float32)), _frozen(y.astype(np.int64))


@lru_cache(maxsize=32)
def _line(n, slope, intercept, noise, seed):
    _generating("MakeLine", (n, 1))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 1))
    y = slope * x + intercept + rng.normal(0, noise, (n, 1))
    return _frozen(x.astype(np.float32)), _frozen(y.astype(np.float32))


@lru_cache(maxsize=32)
def _sine(n, periods, noise, seed):
    _generating("MakeSine", (n, 1))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-math.pi * periods, math.pi * periods, (n, 1))
    y = np.sin(x) + rng.normal(0, noise, (n, 1))
    return _frozen(x.astype(np.float32)), _frozen(y.astype(np.float32))


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _batch(name, x, y, data, batch_size, test_fraction, shuffle, seed):
    rows = _rows(len(x), data, batch_size=batch_size, test_fraction=test_fraction, shuffle=shuffle,
                 seed=seed, who=name)
    return _taken(x, rows, f"{name}'s batch of features"), _taken(y, rows, f"{name}'s batch of labels")


@block("MakeMoons", category="data_ops")
class MakeMoons:
    """Two interleaving half circles in the plane (scikit-learn's make_moons): a classifier needs
    a curved boundary. Features [?, 2] float32; labels 0 / 1."""

    outputs = (_features(), _targets())
    attrs = (_N, _NOISE, _LABELS, *_COMMON)

    def infer(*, n, noise, label_format, batch_size, test_fraction, shuffle, seed):
        return _class_types(2, 2, label_format)

    def forward(*, n, noise, label_format, batch_size, test_fraction, shuffle, seed, data):
        x, y = _moons(n, float(noise), seed)
        x, y = _batch("MakeMoons", x, y, data, batch_size, test_fraction, shuffle, seed)
        return x, _classes_out(y, 2, label_format)


@block("MakeSpirals", category="data_ops")
class MakeSpirals:
    """Interleaved spiral arms, one class per arm: hard for a linear model, easy to draw.
    Features [?, 2] float32; labels 0 .. classes-1."""

    outputs = (_features(), _targets())
    attrs = (_N, Attr("noise", "float", 0.05, min=0.0, doc="standard deviation of the Gaussian noise"),
             Attr("classes", "int", 2, min=2, max=10, doc="number of arms (classes)"),
             Attr("turns", "float", 1.0, min=0.1, max=5.0, doc="how many turns each arm makes"),
             _LABELS, *_COMMON)

    def infer(*, n, noise, classes, turns, label_format, batch_size, test_fraction, shuffle, seed):
        return _class_types(2, classes, label_format)

    def forward(*, n, noise, classes, turns, label_format, batch_size, test_fraction, shuffle, seed, data):
        x, y = _spirals(n, float(noise), classes, float(turns), seed)
        x, y = _batch("MakeSpirals", x, y, data, batch_size, test_fraction, shuffle, seed)
        return x, _classes_out(y, classes, label_format)


@block("MakeBlobs", category="data_ops")
class MakeBlobs:
    """Gaussian blobs, one per class, around seeded random centres in [-5, 5]^dims.
    Features [?, dims] float32; labels 0 .. classes-1."""

    outputs = (_features(), _targets())
    attrs = (_N, Attr("classes", "int", 3, min=1, max=100, doc="number of blobs (classes)"),
             Attr("dims", "int", 2, min=1, max=10_000, doc="dimensions of each example"),
             Attr("spread", "float", 1.0, min=0.0, doc="standard deviation of each blob"),
             _LABELS, *_COMMON)

    def infer(*, n, classes, dims, spread, label_format, batch_size, test_fraction, shuffle, seed):
        if n * dims * 8 > 4 * 1024 ** 3:     # generated in float64 before the float32 copy
            raise ShapeError(f"MakeBlobs: {n:,} examples of {dims:,} dimensions would take "
                             f"{n * dims * 8 / 1024 ** 3:,.0f} GiB to generate; the limit is 4 GiB")
        return _class_types(dims, classes, label_format)

    def forward(*, n, classes, dims, spread, label_format, batch_size, test_fraction, shuffle, seed, data):
        x, y = _blobs(n, classes, dims, float(spread), seed)
        x, y = _batch("MakeBlobs", x, y, data, batch_size, test_fraction, shuffle, seed)
        return x, _classes_out(y, classes, label_format)


@block("MakeXor", category="data_ops")
class MakeXor:
    """The XOR truth table: the corners (0,0) (0,1) (1,0) (1,1) labelled 0 1 1 0, repeated to n
    examples with noise when n > 4. With n = 4 (the default), exactly the table, no test part."""

    outputs = (_features(), _targets())
    attrs = (Attr("n", "int", 4, min=4, max=10_000_000, doc="number of examples (4: the table itself)"),
             _NOISE, _LABELS, _BATCH, Attr("test_fraction", "float", 0.0, min=0.0, max=0.9,
                                           doc="share of the examples held out for evaluation"),
             _SHUFFLE, _SEED)

    def infer(*, n, noise, label_format, batch_size, test_fraction, shuffle, seed):
        return _class_types(2, 2, label_format)

    def forward(*, n, noise, label_format, batch_size, test_fraction, shuffle, seed, data):
        x, y = _xor(n, float(noise), seed)
        x, y = _batch("MakeXor", x, y, data, batch_size, test_fraction, shuffle, seed)
        return x, _classes_out(y, 2, label_format)


@block("MakeLine", category="data_ops")
class MakeLine:
    """Points on a noisy line: y = slope·x + intercept + noise, x uniform in [-1, 1]. For linear
    regression. Features [?, 1] float32; labels (the y values) [?, 1] float32."""

    outputs = (_features(), _targets("the y values, one per row"))
    attrs = (_N, Attr("slope", "float", 1.0), Attr("intercept", "float", 0.0), _NOISE, *_COMMON)

    def infer(*, n, slope, intercept, noise, batch_size, test_fraction, shuffle, seed):
        return TensorType((None, 1), "float32"), TensorType((None, 1), "float32")

    def forward(*, n, slope, intercept, noise, batch_size, test_fraction, shuffle, seed, data):
        x, y = _line(n, float(slope), float(intercept), float(noise), seed)
        return _batch("MakeLine", x, y, data, batch_size, test_fraction, shuffle, seed)


@block("MakeSine", category="data_ops")
class MakeSine:
    """A noisy sine wave: y = sin(x) + noise, x uniform over ``periods`` periods around 0. For
    regression with a small network. Features [?, 1] float32; labels [?, 1] float32."""

    outputs = (_features(), _targets("the y values, one per row"))
    attrs = (_N, Attr("periods", "float", 1.0, min=0.1, max=100.0, doc="how many periods of the wave"),
             _NOISE, *_COMMON)

    def infer(*, n, periods, noise, batch_size, test_fraction, shuffle, seed):
        return TensorType((None, 1), "float32"), TensorType((None, 1), "float32")

    def forward(*, n, periods, noise, batch_size, test_fraction, shuffle, seed, data):
        x, y = _sine(n, float(periods), float(noise), seed)
        return _batch("MakeSine", x, y, data, batch_size, test_fraction, shuffle, seed)


# ------------------------------------------------------------------------------- files
_PATH = Attr("path", "str", "", doc="the file, relative to the project's folder")
_LABEL_KIND = Attr("label_format", "choice", "index", choices=("index", "onehot", "value"),
                   doc="class indices (int32 [?]), one-hot rows (float32 [?, classes]) or the "
                       "column's values (float32 [?, 1])")


def _table(files, path: str, who: str):
    if not path:
        raise ShapeError(f"{who}: give the path of the file (relative to the project's folder)")
    if files is None:
        raise ShapeError(f"{who}: files can only be read from a project saved in a folder")
    return files.table(path)


def _split_columns(who, names, table, label):
    if label and label not in names:
        raise ShapeError(f"{who}: the file has no column '{label}' (columns: {', '.join(names)})")
    keep = [i for i, c in enumerate(names) if c != label]
    if not keep:
        raise ShapeError(f"{who}: the file has no feature column besides the label")
    reserve((table.shape[0], len(keep)), table.dtype, f"{who}'s feature columns")
    x = table[:, keep]
    y = table[:, names.index(label)] if label else None
    return x, y


def _label_out(who, y, label_format, classes):
    if y is None:   # no label column: an empty batch of labels of the declared type
        t = _label_type(label_format, classes)
        return np.zeros((0,) + tuple(t.shape[1:]), t.dtype)
    if label_format == "value":
        return y.astype(np.float32).reshape(-1, 1)
    if not np.all(np.isfinite(y)) or np.any(y != np.round(y)) or np.any(y < 0):
        raise ValueError(f"{who}: class labels must be whole numbers from 0")
    # compared before the cast: a label past int64 (1e300, a uint64's 2**64-1) wraps in it, to a
    # class that exists (0, -1) or an index one-hot cannot take
    top = y.max() if y.size else 0
    if top >= classes:
        raise ValueError(f"{who}: a label is {float(top):.15g} but classes is {classes}")
    return _classes_out(y.astype(np.int64), classes, label_format)


def _label_type(label_format, classes):
    if label_format == "value":
        return TensorType((None, 1), "float32")
    return TensorType((None,), "int32") if label_format == "index" else TensorType((None, classes), "float32")


@block("CsvDataset", category="data_ops")
class CsvDataset:
    """A table from a .csv file with a header row: the ``label`` column gives the labels, every
    other column is a feature (numbers only). Features [?, columns] float32."""

    outputs = (_features(), _targets())
    attrs = (_PATH, Attr("label", "str", "label", doc="the label column's name ('' for none: labels empty)"),
             _LABEL_KIND, Attr("classes", "int", 2, min=1, max=100_000, doc="number of classes (index/onehot)"),
             *_COMMON)

    def infer(*, path, label, label_format, classes, batch_size, test_fraction, shuffle, seed, files):
        names, table = _table(files, path, "CsvDataset")
        x, _ = _split_columns("CsvDataset", names, table, label)
        return TensorType((None, x.shape[1]), "float32"), _label_type(label_format, classes)

    def forward(*, path, label, label_format, classes, batch_size, test_fraction, shuffle, seed, files, data):
        names, table = _table(files, path, "CsvDataset")
        x, y = _split_columns("CsvDataset", names, table, label)
        rows = _rows(len(x), data, batch_size=batch_size, test_fraction=test_fraction, shuffle=shuffle,
                     seed=seed, who="CsvDataset")
        return (_features_out(x, rows, "CsvDataset"),
                _label_out("CsvDataset", None if y is None else _taken(y, rows, "CsvDataset's labels"), label_format,
                           classes))


@block("NumpyDataset", category="data_ops")
class NumpyDataset:
    """Arrays from a .npz file (``features_key`` and ``labels_key``) or a .npy file (features
    only), loaded without pickle. Features: the array's rows, flattened to [?, d] float32."""

    outputs = (_features(), _targets())
    attrs = (_PATH, Attr("features_key", "str", "x", doc="the features array in a .npz file"),
             Attr("labels_key", "str", "y", doc="the labels array in a .npz file ('' for none)"),
             _LABEL_KIND, Attr("classes", "int", 2, min=1, max=100_000, doc="number of classes (index/onehot)"),
             *_COMMON)

    def infer(*, path, features_key, labels_key, label_format, classes, batch_size, test_fraction, shuffle, seed,
              files):
        x, _ = _arrays(files, path, features_key, labels_key)
        return TensorType((None, x.shape[1]), "float32"), _label_type(label_format, classes)

    def forward(*, path, features_key, labels_key, label_format, classes, batch_size, test_fraction, shuffle, seed,
                files, data):
        x, y = _arrays(files, path, features_key, labels_key)
        rows = _rows(len(x), data, batch_size=batch_size, test_fraction=test_fraction, shuffle=shuffle,
                     seed=seed, who="NumpyDataset")
        return (_features_out(x, rows, "NumpyDataset"),
                _label_out("NumpyDataset", None if y is None else _taken(y, rows, "NumpyDataset's labels"),
                           label_format, classes))


def _features_out(x, rows, who):
    """The batch's features as float32 (the file's rows ``rows``), each copy reserved first."""
    batch = _taken(x, rows, f"{who}'s batch of features")
    if batch.dtype != np.float32:
        reserve(batch.shape, np.float32, f"{who}'s batch of features as float32")
    return batch.astype(np.float32)


def _arrays(files, path, features_key, labels_key):
    who = "NumpyDataset"
    if not path:
        raise ShapeError(f"{who}: give the path of the file (relative to the project's folder)")
    if files is None:
        raise ShapeError(f"{who}: files can only be read from a project saved in a folder")
    arrays = files.arrays(path)
    if features_key not in arrays:
        raise ShapeError(f"{who}: the file has no array '{features_key}' (arrays: {', '.join(arrays)})")
    x = np.asarray(arrays[features_key])
    if x.ndim == 0 or x.dtype.kind not in "biuf":
        raise ShapeError(f"{who}: '{features_key}' must be an array of numbers with one example per row")
    x = x.reshape(len(x), math.prod(x.shape[1:]))   # -1 is no size when there are no rows
    y = None
    if labels_key and labels_key in arrays:
        y = np.asarray(arrays[labels_key]).reshape(-1)
        if y.shape[0] != x.shape[0]:
            raise ShapeError(f"{who}: '{labels_key}' has {y.shape[0]} rows but '{features_key}' has {x.shape[0]}")
    elif labels_key and path.endswith(".npz"):
        raise ShapeError(f"{who}: the file has no array '{labels_key}' (arrays: {', '.join(arrays)})")
    return x, y


# ------------------------------------------------------------------------------- packaged datasets
#: the datasets scikit-learn ships inside its wheel (no download): name -> (image side, classes);
#: the side is 0 for a table, which has no image layout
PACKAGED = {"digits": (8, 10), "iris": (0, 3), "wine": (0, 3), "breast_cancer": (0, 2)}
INSTALL_HINT = "pip install 'blockflow[datasets]' (or pip install scikit-learn)"


@lru_cache(maxsize=8)
def _packaged(name: str):
    """(features [n, d] float32, labels [n] int64) of scikit-learn's ``load_<name>()``; imported
    here, when a page uses the block, so that blockflow itself does not need scikit-learn."""
    try:
        from sklearn import datasets
    except ImportError:
        raise ShapeError(f"PackageDataset: the dataset '{name}' comes with scikit-learn, which is not "
                         f"installed: {INSTALL_HINT}") from None
    bunch = getattr(datasets, f"load_{name}")()
    x, y = np.asarray(bunch.data, np.float64), np.asarray(bunch.target, np.int64)
    reserve(x.shape, np.float32, f"the {name} dataset")
    return _frozen(x.astype(np.float32)), _frozen(y)


@lru_cache(maxsize=8)
def _prepared(name: str, scaling: str, test_fraction: float, seed: int) -> np.ndarray:
    """The dataset's features scaled by statistics of its train part only (the test part must not
    leak into them): computed once per dataset, split and scaling, not once per step."""
    x, _ = _packaged(name)
    if scaling == "none":
        return x
    reserve(x.shape, np.float32, "the scaled features")
    part = x[_split(len(x), test_fraction, seed)[0]]
    if scaling == "max":
        return _frozen(x / np.float32(float(np.abs(part).max()) or 1.0))
    std = part.std(0)
    return _frozen(((x - part.mean(0)) / np.where(std > 0, std, 1.0)).astype(np.float32))


@block("PackageDataset", category="data_ops")
class PackageDataset:
    """A dataset that scikit-learn ships in its package, by name (no download, no file to keep):
    digits (1,797 handwritten digits, 8x8 pixels 0..16, 10 classes), iris (150 flowers, 4
    features, 3 classes), wine (178 wines, 13 features, 3 classes) and breast_cancer (569
    tumours, 30 features, 2 classes). Needs scikit-learn: pip install 'blockflow[datasets]'.

    ``layout`` images gives digits as [?, 8, 8, 1] (NHWC, for Conv2D), rows as [?, features].
    ``scaling`` uses the train part's statistics: max divides by its largest value (digits:
    0..1), standard makes each feature zero-mean, unit-variance there."""

    outputs = (_features(), _targets())
    attrs = (Attr("name", "choice", "digits", choices=tuple(PACKAGED), doc="which of scikit-learn's datasets"),
             Attr("layout", "choice", "rows", choices=("rows", "images"),
                  doc="rows: [?, features]; images: [?, side, side, 1] (digits only)"),
             Attr("scaling", "choice", "max", choices=("none", "max", "standard"),
                  doc="none; max: divide by the train part's largest value; standard: per feature, "
                      "the train part's mean and standard deviation"),
             _LABELS, *_COMMON)

    def infer(*, name, layout, scaling, label_format, batch_size, test_fraction, shuffle, seed):
        side, classes = PACKAGED[name]
        if layout == "images" and not side:
            raise ShapeError(f"PackageDataset: {name} is a table of features, not images: use layout rows")
        x, _ = _packaged(name)
        if layout == "images":
            features = TensorType((None, side, side, 1), "float32")
        else:
            features = TensorType((None, x.shape[1]), "float32")
        return features, _label_type(label_format, classes)

    def forward(*, name, layout, scaling, label_format, batch_size, test_fraction, shuffle, seed, data):
        side, classes = PACKAGED[name]
        _, y = _packaged(name)
        x = _prepared(name, scaling, float(test_fraction), seed)
        rows = _rows(len(x), data, batch_size=batch_size, test_fraction=test_fraction, shuffle=shuffle,
                     seed=seed, who="PackageDataset")
        batch = _taken(x, rows, "PackageDataset's batch of features")
        if layout == "images":
            batch = batch.reshape(len(rows), side, side, 1)
        return batch, _classes_out(_taken(y, rows, "PackageDataset's batch of labels"), classes, label_format)
