"""A compiled page as one standalone PyTorch file: an ``nn.Module`` per composite, a ``Model`` for
the page, and the initial values beside it (docs/export.md).

The page is compiled (flattened) first, so the code says exactly what blockflow runs; the
composite instances the flattening recorded (``program.hierarchy``) become sub-modules again,
one class per distinct body (instances with the same parameters share a class; an instance that
shares another's Variables is that module object). Each block is one line (or a few) written by
its lowering (torch_lowering.py); a block with none is refused by name, with every such block of
the page listed.

State-changing blocks (Apply*, Assign) compute their new values where they stand and write them
when ``forward`` ends, under ``torch.no_grad()``: every block of a run reads the values from the
run's start, as blockflow runs them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from blockflow.compile.compiler import compile_project
from blockflow.compile.program import Program, Step
from blockflow.export.errors import ExportError
from blockflow.export.lowering import check_compiled, refuse_unlowered
from blockflow.export.names import Names, comment_text
from blockflow.export.torch_class import SMALL_CONSTANT, ClassWriter, parent
from blockflow.export.torch_lowering import lowering_table
from blockflow.project import Project, port_text, split_port_text
from blockflow.registry import Registry
from blockflow.run.settings import recommended_settings

__all__ = ["TorchExport", "ExportError", "export_torch", "refused_blocks", "needed_nodes", "output_slots",
           "SMALL_CONSTANT"]





@dataclass
class TorchExport:
    """What an export made: the module's source, its initial state (state_dict key -> array),
    the forward arguments (argument name, flat node id, TensorType) and the outputs returned
    (``node:port`` texts, in order)."""

    source: str
    state: dict
    inputs: list
    outputs: list
    page: str
    blocks: frozenset = frozenset()
    #: argument name -> flat id of each Placeholder differentiated by a Gradients block
    needs_grad: list = field(default_factory=list)
    #: state_dict key -> the flat id of the Variable it holds (a shared one under both keys), or
    #: (Variable flat id, slot key) for an optimizer's slot state
    variables: dict = field(default_factory=dict)


def needed_nodes(program: Program, out_slots) -> set:
    """The flat nodes a forward returning ``out_slots`` runs: what the outputs depend on, and the
    blocks that change state with what they depend on."""
    import networkx as nx
    roots = {program.slot(s).node for s in out_slots} | {st.node for st in program.steps if st.refs}
    needed = set(roots)
    for node in roots:
        if node in program.graph:
            needed |= nx.ancestors(program.graph, node)
    return needed


def refused_blocks(program: Program, needed: set | None = None) -> dict:
    """{block name: [flat node ids]} for the page's blocks (those in ``needed``, default all) with
    no PyTorch lowering."""
    table = lowering_table()
    out: dict = {}
    for st in program.steps:
        if needed is not None and st.node not in needed:
            continue
        if st.role in ("variable", "placeholder", "gradients") or st.spec.name in ("Input", "Output"):
            continue
        if st.spec.is_dataset:
            continue
        if st.spec.name not in table:
            out.setdefault(st.spec.name, []).append(st.node)
    return out


def export_torch(project: Project, page: str | None = None, outputs=None,
                 registry: Registry | None = None, program: Program | None = None) -> TorchExport:
    """The PyTorch module of ``page`` (default: the first). ``outputs``: ``node`` or
    ``node:port`` texts ``forward`` returns (default: the page's loss, else every output no block
    reads). ExportError when the page does not compile or has blocks with no lowering."""
    program = program or compile_project(project, page, registry)
    check_compiled(program)
    out_slots = output_slots(program, outputs)
    refuse_unlowered(program, refused_blocks(program, needed_nodes(program, out_slots)),
                     "faithful PyTorch lowering")
    seed = int(recommended_settings(project, program.page_name).get("seed", 0) or 0)
    return _FileWriter(program, out_slots, seed, project).write()


def output_slots(program: Program, outputs) -> list[int]:
    if outputs:
        try:
            return [program.resolve_target(t) for t in outputs]
        except Exception as exc:   # ProjectError: names no output
            raise ExportError(str(exc)) from None
    if program.loss is not None:
        return [program.resolve_target(None)]
    read = {s for st in program.steps for s in _sources(st)}
    found = [o for st in program.steps if st.role not in ("variable",) and not st.refs
             for o in st.outputs if o not in read]
    if not found:
        raise ExportError(f"page '{program.page_name}' marks no loss and has no unread output: "
                          f"name the outputs to return")
    return found


def _sources(st: Step):
    for src in st.inputs:
        if isinstance(src, tuple):
            yield from src
        elif src is not None:
            yield src




class _FileWriter:
    """Writes the classes bottom-up, then the file around them."""

    def __init__(self, program: Program, out_slots: list, seed: int, project: Project):
        self.program = program
        self.out_slots = out_slots
        self.seed = seed
        self.project = project
        self.table = lowering_table()
        self.helpers: dict[str, str] = {}
        self.classes: dict[str, str] = {}       # body text -> class name
        self.class_order: list[tuple[str, str]] = []
        self.class_names = Names({"Model", "module", "initial", "seed"})   # Model.__init__'s locals
        self.state: dict[str, np.ndarray] = {}
        self.variable_keys: dict = {}
        hier = program.hierarchy
        self.instances = hier.instances
        #: left-out Variable flat id -> the flat id it reads, and back, per reading level
        self.shared_by_level: dict[tuple[str, str], str] = {}
        for left, read in hier.shared.items():
            self.shared_by_level[(parent(left), read)] = left
        self.steps_by_level: dict[str, list[Step]] = {}
        for st in program.steps:
            self.steps_by_level.setdefault(parent(st.node), []).append(st)
        self.children: dict[str, list[str]] = {}
        for path in self.instances:
            self.children.setdefault(parent(path), []).append(path)
        self.shared_vars: dict[str, list[str]] = {}
        for left in hier.shared:
            self.shared_vars.setdefault(parent(left), []).append(left)
        self.blocks: set[str] = set()
        self.needed = needed_nodes(program, out_slots)
        self.class_of_path: dict[str, str] = {}
        self.texts: dict[str, str] = {}
        self.needs_grad = self._placeholders_to_differentiate()

    # ----------------------------------------------------------------------------- the file

    def write(self) -> TorchExport:
        top = ClassWriter(self, "", None)
        body = top.class_body("Model", self._model_doc(), top=True)
        parts = [self._file_doc(), "import math", "from pathlib import Path", "", "import torch",
                 "from torch import nn", ""]
        for name in sorted(self.helpers):
            parts += ["", self.helpers[name].strip("\n"), ""]
        for text, name in self.class_order:
            parts += ["", text.replace("class _BODY_(", f"class {name}("), ""]
        parts += ["", body, ""]
        parts += ["", _LOADER]
        source = "\n".join(parts).replace("\n\n\n\n", "\n\n\n") + "\n"
        compile(source, "<exported model>", "exec")   # a lowering that writes bad code fails here
        inputs = [(arg, node, self.program.slot(self.program.resolve_target(node)).type)
                  for arg, node in top.args]
        outputs = [port_text(self.program.slot(s).node, self.program.slot(s).port) for s in self.out_slots]
        needs_grad = [a for a, n, t in inputs if split_port_text(n)[0] in self.needs_grad and t.dtype.kind == "f"]
        return TorchExport(source, self.state, inputs, outputs, self.program.page_name,
                           frozenset(self.blocks), needs_grad, self.variable_keys)

    def _file_doc(self) -> str:
        page = comment_text(self.program.page_name, 60)
        return (f'"""PyTorch module of page "{page}", exported by blockflow.\n\n'
                "Model(initial=...) starts from the values beside this file (the same .pt name),\n"
                "the values blockflow starts from; initial=None draws them with torch's own\n"
                "initializers instead. forward takes Model.INPUTS and returns Model.OUTPUTS.\n"
                '"""')

    def _model_doc(self) -> str:
        return f"The page {comment_text(self.program.page_name, 60)}."

    def _placeholders_to_differentiate(self) -> set:
        """Placeholders (and dataset outputs) a Gradients block differentiates through: torch
        differentiates only tensors that require grad, so forward makes them do so."""
        program, out = self.program, set()
        for st in program.steps:
            if st.role != "gradients":
                continue
            xs = [program.slot(s).node for s in st.inputs[1]]
            for x in xs:
                for a in {x} | set(_ancestors(program, x)):
                    step = program.step(a)
                    if step is not None and (step.role == "placeholder" or step.spec.is_dataset):
                        out.add(a)
        return out

    def class_for(self, text: str, composite: str) -> str:
        name = self.classes.get(text)
        if name is None:
            name = self.classes[text] = self.class_names(object(), composite, "Composite")
            self.class_order.append((text, name))
        return name

    def helper(self, name: str, source: str) -> None:
        old = self.helpers.get(name)
        if old is not None and old != source:
            raise ValueError(f"two helpers named {name}")
        self.helpers[name] = source


def _ancestors(program: Program, node: str):
    import networkx as nx
    return nx.ancestors(program.graph, node) if node in program.graph else ()


_LOADER = '''def draw_initial(model, generator):
    """Draw the random initial values of every module's INITIALIZERS with torch's generator."""
    with torch.no_grad():
        for module in model.modules():
            for attr, (kind, stddev, scale) in getattr(module, "INITIALIZERS", {}).items():
                value = getattr(module, attr)
                if kind == "random_normal":
                    value.normal_(0.0, stddev, generator=generator)
                elif kind == "random_uniform":
                    value.uniform_(-scale, scale, generator=generator)
                else:
                    if value.dim() == 0:
                        fan_in = fan_out = 1
                    elif value.dim() == 1:
                        fan_in = fan_out = value.shape[0]
                    else:
                        receptive = math.prod(value.shape[:-2])
                        fan_in, fan_out = value.shape[-2] * receptive, value.shape[-1] * receptive
                    if kind == "glorot_uniform":
                        limit = math.sqrt(6.0 / (fan_in + fan_out))
                        value.uniform_(-limit, limit, generator=generator)
                    else:
                        value.normal_(0.0, math.sqrt(2.0 / (fan_in + fan_out)), generator=generator)
    return model


def load_initial(model, path=None, constants_only=False):
    """Load the initial values blockflow wrote beside this file (or ``path``) into ``model``;
    ``constants_only``: only the large constants (the CONSTANTS of each module)."""
    wanted = [f"{prefix}.{name}" if prefix else name for prefix, module in model.named_modules()
              for name in getattr(module, "CONSTANTS", ())]
    if not model.state_dict() or (constants_only and not wanted):
        return model   # nothing to load: the page has no Variables or large constants
    path = Path(__file__).with_suffix(".pt") if path is None else Path(path)
    state = torch.load(path, map_location="cpu", weights_only=True)
    if constants_only:
        model.load_state_dict({k: state[k] for k in wanted}, strict=False)
    else:
        model.load_state_dict(state)
    return model'''
