"""(h) the exported PyTorch module against a hand-written one: the MLP of run.py's (a), exported
with ``blockflow export torch``, a forward and backward step of each on the same weights and
batch, interleaved, torch on one thread (target <= 1.2x). Needs torch (the [torch] extra)."""
from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np


def export_rows(repeats, timeit_pair, mlp_project):
    try:
        import torch
    except ImportError:
        return [("(h) exported MLP step / hand torch", None, 0.0, None, "skipped: torch is not installed")]
    from torch import nn

    from blockflow.compile.compiler import compile_project
    from blockflow.export.files import write_torch_files
    from blockflow.export.torch_module import export_torch

    torch.set_num_threads(1)
    project = mlp_project()
    program = compile_project(project)
    export = export_torch(project, program=program)
    folder = Path(tempfile.mkdtemp(prefix="blockflow-bench-"))
    write_torch_files(export, folder / "mlp_model.py")
    spec = importlib.util.spec_from_file_location("mlp_model", folder / "mlp_model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mlp_model"] = module
    spec.loader.exec_module(module)
    exported = module.Model()

    class Hand(nn.Module):
        """What a PyTorch user writes for the same net."""

        def __init__(self):
            super().__init__()
            self.W = nn.ParameterList([nn.Parameter(torch.from_numpy(np.array(program.variable_values[f"W{i}"])))
                                       for i in (1, 2, 3)])
            self.b = nn.ParameterList([nn.Parameter(torch.from_numpy(np.array(program.variable_values[f"b{i}"])))
                                       for i in (1, 2, 3)])

        def forward(self, x, y):
            h = torch.relu(x @ self.W[0] + self.b[0])
            h = torch.relu(h @ self.W[1] + self.b[1])
            logits = h @ self.W[2] + self.b[2]
            return (-(y * torch.log_softmax(logits, dim=1)).sum(dim=1)).mean()

    hand_model = Hand()
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(64, 784)).astype(np.float32))
    y = torch.from_numpy(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)])
    args = {"x": x, "y": y}
    ordered = [args[node] for _, node, _ in export.inputs]

    def step(model, inputs):
        model.zero_grad(set_to_none=True)
        loss = model(*inputs)
        loss.backward()
        return loss

    a, b = step(hand_model, (x, y)), step(exported, ordered)
    np.testing.assert_allclose(b.item(), a.item(), rtol=1e-5)
    np.testing.assert_allclose(exported.W1.grad.numpy(), hand_model.W[0].grad.numpy(), rtol=1e-4, atol=1e-7)
    h, o = timeit_pair(lambda: step(hand_model, (x, y)), lambda: step(exported, ordered), repeats)
    return [("(h) exported MLP step / hand torch", h, o, 1.20,
             f"torch {torch.__version__}, 1 thread; 'numpy' column: the hand-written nn.Module")]
