"""The text of train.py (torch_train.py fills in its settings, each as an escaped literal).

Kept as one constant so the script reads top to bottom as a PyTorch user would write it: the
data (blockflow's batches, sharded across processes), the update rule (the Apply* block's, from
torch_ops_state.py), the loop with DistributedDataParallel, checkpoints and a loss per step.
"""

TEMPLATE = '''"""Train the exported page __PAGE_COMMENT__ with PyTorch: written by blockflow.

One process:       python train.py [--steps N] [--checkpoint ck.pt]
Several processes: torchrun --nproc_per_node=2 train.py [...]   (gloo on CPU, NCCL on CUDA)

Batch k is the batch blockflow's training step k gives (the same rows, the same order); with N
processes each takes every N-th row of it and DistributedDataParallel averages their gradients,
so the step is the one-process step when the batch divides evenly and the loss is a mean.
"""
import os
import sys

# Python puts this file's folder first on sys.path, and the module exported beside it may be
# named like a module torch or numpy imports (typing.py, inspect.py): it would be imported in that
# module's place. It is loaded by its path (load_model_module), so the folder leaves the path.
_FOLDER = os.path.dirname(os.path.realpath(__file__))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _FOLDER]

import argparse
import csv
import importlib.util
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, Sampler
from torch.utils.data.distributed import DistributedSampler

HERE = Path(__file__).resolve().parent
MODEL_FILE = __MODEL_FILE__
DATA_FILE = __DATA_FILE__
#: the project's recommended training settings for the page
SETTINGS = __SETTINGS__
#: the forward arguments: those batched from the dataset block's rows, and fixed feeds
ROW_ARGS = __ROW_ARGS__
ROW_PORTS = __ROW_PORTS__
FIXED_ARGS = __FIXED_ARGS__
#: how the dataset block picks batch k (its attrs)
BATCHING = __BATCHING__
#: a CsvDataset's or NumpyDataset's file (relative to the project's folder) and how it is read;
#: None: the rows are in DATA_FILE
SOURCE = __SOURCE__
PROJECT_FOLDER = __PROJECT_FOLDER__
#: optimizer mode: the Apply* block's inputs in order, its slots (name, "like"/"scalar", start)
RULE_INPUTS = __RULE_INPUTS__
RULE_SLOTS = __RULE_SLOTS__
RULE_FLAGS = __RULE_FLAGS__
#: whether some trainable Variable gets no gradient of the loss (DDP must then look for it)
UNUSED_PARAMETERS = __UNUSED__
#: forward's arguments, in order (Model.INPUTS names their blocks)
ARGS = __ARGS__


__RULE_SOURCE__


#: the update rule of optimizer mode (the helper above; None in graph mode)
RULE = __RULE_NAME__


def load_model_module():
    spec = importlib.util.spec_from_file_location("exported_model", HERE / MODEL_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------- data

class Rows(Dataset):
    """The dataset block's whole table (blockflow wrote it beside this file): example i is row i."""

    def __init__(self, tables):
        self.tables = tables

    def __len__(self):
        return len(self.tables[0]) if self.tables else 0

    def __getitem__(self, i):
        return tuple(t[i] for t in self.tables)


def read_csv(full):
    """(column names, float64 rows) of a .csv file with a header row, blank rows skipped."""
    with open(full, encoding="utf-8-sig", newline="") as f:
        rows = [row for row in csv.reader(f) if row and any(c.strip() for c in row)]
    names = [c.strip() for c in rows[0]]
    return names, np.array([[float(c) for c in row] for row in rows[1:]], dtype=np.float64).reshape(-1, len(names))


def labels_of(y):
    """The label column as the block gives it: values, class indices or one-hot rows."""
    if SOURCE["label_format"] == "value":
        return y.astype(np.float32).reshape(-1, 1)
    if not np.all(np.isfinite(y)) or np.any(y != np.round(y)) or np.any(y < 0) or np.any(y >= SOURCE["classes"]):
        raise SystemExit(f"{SOURCE['path']}: class labels must be whole numbers from 0 to {SOURCE['classes'] - 1}")
    k = y.astype(np.int64)
    if SOURCE["label_format"] == "onehot":
        out = np.zeros((k.size, SOURCE["classes"]), np.float32)
        out[np.arange(k.size), k] = 1.0
        return out
    return k.astype(np.int32)


def read_source(folder):
    """The dataset block's whole table read from its file, as blockflow reads it: a tensor per
    ROW_ARGS."""
    root = Path(folder).resolve()
    full = (root / SOURCE["path"]).resolve()
    if root not in full.parents:
        raise SystemExit(f"{SOURCE['path']} leads out of the data folder {root}")
    if SOURCE["block"] == "CsvDataset":
        names, table = read_csv(full)
        label = SOURCE["label"]
        x = table[:, [i for i, c in enumerate(names) if c != label]]
        y = table[:, names.index(label)] if "labels" in ROW_PORTS else None
    else:
        arrays = dict(np.load(full, allow_pickle=False)) if full.suffix.lower() == ".npz" else {
            "x": np.load(full, allow_pickle=False)}
        x = np.asarray(arrays[SOURCE["features_key"]])
        x = x.reshape(len(x), -1)
        y = np.asarray(arrays[SOURCE["labels_key"]]).reshape(-1) if "labels" in ROW_PORTS else None
    out = {"features": torch.from_numpy(x.astype(np.float32))}
    if y is not None:
        out["labels"] = torch.from_numpy(labels_of(y))
    return [out[port] for port in ROW_PORTS]


def train_rows(n, test_fraction, seed):
    """blockflow's seeded train/test split: the train part's row numbers, sorted."""
    order = np.random.default_rng([seed, 0x5EED]).permutation(n)
    n_test = int(round(n * test_fraction))
    if test_fraction > 0 and n_test == 0 and n > 1:
        n_test = 1
    return np.sort(order[n_test:])


def batch_rows(step, n, run_seed):
    """The rows blockflow's training step ``step`` gives (blocks/data_ops.py's _rows)."""
    train = train_rows(n, BATCHING["test_fraction"], BATCHING["seed"])
    size = BATCHING["batch_size"]
    if size <= 0 or size >= train.size:
        return train
    per_epoch = math.ceil(train.size / size)
    epoch, b = divmod(step, per_epoch)
    key = [BATCHING["seed"], epoch, 1] + ([run_seed] if run_seed else [])
    order = np.random.default_rng(key).permutation(train.size) if BATCHING["shuffle"] else np.arange(train.size)
    return train[order[b * size:(b + 1) * size]]


class BlockflowBatches(Sampler):
    """Batch ``first``, ``first + 1``... of blockflow's order, each cut among the processes: this
    process takes rows ``rank::world`` of every batch (the role of a DistributedSampler, in the
    order blockflow trains in)."""

    def __init__(self, n, steps, first, run_seed, rank, world):
        self.n, self.steps, self.first, self.run_seed = n, steps, first, run_seed
        self.rank, self.world = rank, world

    def __len__(self):
        return max(self.steps - self.first, 0)

    def __iter__(self):
        for k in range(self.first, self.steps):
            yield batch_rows(k, self.n, self.run_seed)[self.rank::self.world].tolist()


def torch_order_batches(rows, args, rank, world, first):
    """--order torch: torch's DistributedSampler (its own seeded shuffle of the train part, a
    share per process), epoch after epoch; not blockflow's batches."""
    train = train_rows(len(rows), BATCHING["test_fraction"], BATCHING["seed"])
    part = torch.utils.data.Subset(rows, train.tolist())
    size = BATCHING["batch_size"] if BATCHING["batch_size"] > 0 else len(part)
    sampler = DistributedSampler(part, num_replicas=world, rank=rank, shuffle=BATCHING["shuffle"],
                                 seed=args.seed)
    loader = DataLoader(part, batch_size=max(size // world, 1), sampler=sampler)
    per_epoch = len(loader)
    epoch = first // per_epoch
    skip = first % per_epoch
    while True:
        sampler.set_epoch(epoch)
        for i, batch in enumerate(loader):
            if i >= skip:
                yield batch
        epoch, skip = epoch + 1, 0


def batches(args, rank, world, first, device):
    """Each step's forward arguments, from step ``first`` on."""
    data = torch.load(HERE / DATA_FILE, map_location="cpu", weights_only=True) if (HERE / DATA_FILE).exists() else {}
    fixed = {a: data[a].to(device) for a in FIXED_ARGS}
    if not ROW_ARGS:
        while True:
            yield fixed
    rows = Rows(read_source(args.data_folder) if SOURCE else [data[a] for a in ROW_ARGS])
    if args.order == "torch":
        loader = torch_order_batches(rows, args, rank, world, first)
    else:
        loader = DataLoader(rows, batch_sampler=BlockflowBatches(len(rows), args.steps, first, args.seed, rank, world))
    for batch in loader:
        yield {**fixed, **{a: t.to(device) for a, t in zip(ROW_ARGS, batch)}}


# ------------------------------------------------------------------------------ the update

def initial_slots(param):
    """The Apply* block's slots for one Variable, started as blockflow starts them."""
    out = {}
    for name, kind, start in RULE_SLOTS:
        value = SETTINGS["hyper"][start] if isinstance(start, str) else start
        out[name] = torch.full_like(param, value) if kind == "like" else torch.tensor(value, dtype=param.dtype,
                                                                                        device=param.device)
    return out


@torch.no_grad()
def optimizer_step(model, slots):
    """Every trained Variable (a Parameter with a gradient) updated by the Apply* rule."""
    for name, param in model.named_parameters():
        if param.grad is None:
            continue
        state = slots.setdefault(name, initial_slots(param))
        args = []
        for n in RULE_INPUTS:
            if n == "var":
                args.append(param)
            elif n in state:
                args.append(state[n])
            elif n in ("grad", "delta"):
                args.append(param.grad)
            else:
                value = SETTINGS["hyper"]["lr" if n in ("lr", "alpha") else n]
                args.append(torch.tensor(value, dtype=param.dtype, device=param.device))
        new, *changed = RULE(*args, *RULE_FLAGS)
        param.copy_(new)
        state.update(zip([s for s, _, _ in RULE_SLOTS], changed))


# ------------------------------------------------------------------------------ the loop

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=SETTINGS["steps"], help="total steps (default: the project's)")
    p.add_argument("--seed", type=int, default=SETTINGS["seed"], help="the run seed: blockflow's batch order (the initial values stay model.pt's)")
    p.add_argument("--checkpoint", metavar="PATH", help="resume from PATH when it exists; save to it")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="K", help="also save every K steps")
    p.add_argument("--order", choices=("blockflow", "torch"), default="blockflow",
                   help="blockflow: blockflow's batches; torch: a DistributedSampler's")
    p.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    p.add_argument("--data-folder", default=PROJECT_FOLDER,
                   help="where the dataset's file is (default: the project's folder)")
    p.add_argument("--quiet", action="store_true", help="no loss per step")
    return p.parse_args()


def setup():
    """(rank, world, device): one process, or torchrun's (its environment variables)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    return rank, world, device


def save(path, model, slots, step, losses):
    tmp = Path(str(path) + ".tmp")
    torch.save({"step": step, "model": model.state_dict(), "slots": slots, "losses": losses}, tmp)
    os.replace(tmp, path)


def main():
    args = parse_args()
    rank, world, device = setup()
    if args.device:
        if args.device.split(":")[0] not in ("cpu", "cuda"):
            raise SystemExit(f"--device {args.device}: give cpu or cuda")
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise SystemExit("--device cuda: CUDA is not available here (no GPU, or a CPU-only torch); use --device cpu")
        device = torch.device(args.device)
    if args.checkpoint and not Path(args.checkpoint).resolve().parent.is_dir():
        raise SystemExit(f"--checkpoint {args.checkpoint}: the folder it goes in does not exist")
    if SETTINGS["mode"] == "graph" and world > 1:
        raise SystemExit("this page trains itself (its own Gradients and Apply* blocks run inside forward): "
                         "DistributedDataParallel cannot average gradients it never sees; run one process")
    torch.manual_seed(args.seed)
    module = load_model_module()
    model = module.Model().to(device)
    slots, first, losses = {}, 0, []
    if args.checkpoint and Path(args.checkpoint).exists():
        try:
            saved = torch.load(args.checkpoint, map_location=device, weights_only=True)
            model.load_state_dict(saved["model"])
            slots, first, losses = saved["slots"], saved["step"], saved["losses"]
        except Exception as exc:     # not a file this script saved (or saved for another page)
            raise SystemExit(f"--checkpoint {args.checkpoint}: not a checkpoint of this model "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
        if rank == 0:
            print(f"resumed from {args.checkpoint} at step {first}")
    model.train()
    net = model
    if world > 1 and SETTINGS["mode"] == "optimizer":
        net = DistributedDataParallel(model, find_unused_parameters=UNUSED_PARAMETERS)
    t0 = time.perf_counter()
    done = first
    for step, feeds in zip(range(first, args.steps), batches(args, rank, world, first, device)):
        for param in model.parameters():
            param.grad = None
        loss = net(*[feeds[a] for a in ARGS])
        if isinstance(loss, tuple):
            loss = loss[0]
        if SETTINGS["mode"] == "optimizer":
            if loss.requires_grad:    # else no gradient of the loss reaches a Variable
                loss.backward()
            optimizer_step(model, slots)
        value = loss.detach().clone()
        if world > 1:
            dist.all_reduce(value)
            value /= world
        value = float(value)
        losses.append(value)
        if not math.isfinite(value):
            raise SystemExit(f"step {step}: the loss is {value}; stopped")
        if rank == 0 and not args.quiet:
            print(f"step {step} loss {value!r}", flush=True)
        if args.checkpoint and args.checkpoint_every and (step + 1) % args.checkpoint_every == 0 and rank == 0:
            save(args.checkpoint, model, slots, step + 1, losses)
        done = step + 1
    if args.checkpoint and rank == 0:
        save(args.checkpoint, model, slots, done, losses)
    if rank == 0:
        print(f"trained {done - first} steps in {time.perf_counter() - t0:.2f} s on {world} process(es)")
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
        # everything is saved and printed: leave now, as torch 2.13's gloo threads can abort the
        # interpreter's own exit ("terminate called without an active exception") under load
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
'''
