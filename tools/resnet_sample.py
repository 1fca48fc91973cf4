"""The resnet_gradients sample: ResNet-50 imported from ONNX (the onnx package's own test model),
made small enough to run in a moment, with a page for a teacher on where its gradient is strongest
and what the skip connections do (docs/samples.md). Built by tools/make_samples.py; needs onnx.

What changes from the file: the input is one 64 x 64 image instead of 224 x 224 (the network is the
same fifty layers; its last 7 x 7 average pool becomes the mean over what is left, 2 x 2, which is
what it is at 224); the weights are not stored but drawn at first use (seeded He-normal for the
convolutions, the classifier's from its fan-in), and each batch norm's statistics are set to those
of the activations it sees on the sample's image, as after training, so every layer passes on
values of a sensible size. A second page takes the skip connections away.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

SIDE = 64
LABEL = 7
#: the scale each residual branch's last batch norm starts with: small, as ResNets are started
#: (torchvision's zero_init_residual and Goyal et al. 2017 use 0; the branches then learn nothing at
#: first), so each unit begins near the identity
BRANCH_SCALE = 0.2
#: float64: fifty layers summed in float32 in two orders (blockflow's and an export's) differ by
#: up to 1e-3 here and there, more than the export tests allow; in float64 they agree to 1e-10
DTYPE = "float64"


def _image() -> np.ndarray:
    """A [1, 3, SIDE, SIDE] picture: three gratings of different angle and frequency, one per
    channel, in [0, 1] (no file, no random numbers)."""
    y, x = np.mgrid[0:SIDE, 0:SIDE] / SIDE
    chans = [0.5 + 0.5 * np.sin(2 * np.pi * (3 * x + 1 * y)), 0.5 + 0.5 * np.sin(2 * np.pi * (1 * x - 4 * y)),
             0.5 + 0.5 * np.cos(2 * np.pi * 6 * np.hypot(x - 0.5, y - 0.5))]
    return np.stack(chans)[None].astype(np.float32)


def _import_page():
    import onnx

    from blockflow.importing.onnx_import import import_onnx

    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
    # framed rather than made composites: the lesson is the skip connections, which must be on the
    # page to be seen (inside res2_0 .. res5_2 they would be one double-click away each)
    project, report = import_onnx(path, page_name="resnet50", group="frames")
    return project, report


def _readers(page, nid):
    return [(e.dst, e.dst_port) for e in page.edges if e.src == nid]


def _small_input(page, report) -> None:
    (placeholder,) = report.inputs.values()
    page.nodes[placeholder].attrs.update(shape=[1, 3, SIDE, SIDE], dtype=DTYPE)
    page.nodes[placeholder].label = f"image [1, 3, {SIDE}, {SIDE}]"
    page.feeds[placeholder] = _image().astype(DTYPE)
    page.feeds["labels"] = np.array([LABEL], np.int64)
    (pool,) = [nid for nid, n in page.nodes.items() if n.block == "AvgPool"]
    node = page.nodes[pool]
    node.block, node.attrs = "Mean", {"keep_dims": True}
    node.inputs = {"axis": np.array([2, 3], np.int32)}
    node.label = "mean over height and width"
    page.edges = [e.__class__(e.src, e.src_port, e.dst, "input") if e.dst == pool else e for e in page.edges]


def _drawn_weights(page) -> None:
    """Each Variable's stored value replaced by a seeded draw (a batch norm's: ones and zeros, but
    the scale of each branch's last one, BRANCH_SCALE)."""
    branch_ends = {e.src for e in page.edges if e.dst_port == "inputs[0]" and page.nodes[e.dst].block == "AddN"}
    for i, (nid, node) in enumerate(sorted(page.nodes.items())):
        if node.block != "Variable":
            continue
        shape = list(np.shape(node.attrs["initial_value"]))
        (reader, port), = _readers(page, nid)
        attrs = {"shape": shape, "dtype": DTYPE, "trainable": True, "seed": i}
        if len(shape) == 4:      # a Conv2D filter [kh, kw, in, out]: He-normal
            attrs.update(initializer="random_normal", stddev=math.sqrt(2.0 / (shape[0] * shape[1] * shape[2])))
        elif len(shape) == 2:    # the classifier [classes, features]
            attrs.update(initializer="random_normal", stddev=math.sqrt(1.0 / shape[1]))
        elif port == "scale" and reader in branch_ends:
            attrs.update(initializer="value", initial_value=np.full(shape, BRANCH_SCALE, DTYPE))
        elif port in ("scale", "variance"):
            attrs["initializer"] = "ones"
        else:                    # offsets, means, the classifier's bias
            attrs["initializer"] = "zeros"
        node.attrs = attrs


def _calibrated(project, page_name: str) -> None:
    """Each batch norm's mean and variance set, in order, to its input's on the sample's image."""
    from blockflow.compile.compiler import compile_project
    from blockflow.run.runtime import run

    page = project.page(page_name)
    program = compile_project(project, page_name)
    overrides = {}
    feeding = {(e.dst, e.dst_port): e.src for e in page.edges}
    for st in program.steps:
        if st.spec.name != "FusedBatchNormV3":
            continue
        x = None
        result = run(program, {}, record=True, variables=overrides, check_numerics=True)
        src = next(e for e in page.edges if e.dst == st.node and e.dst_port == "x")
        x = result.value(src.src, src.src_port).astype(np.float64)
        overrides[feeding[(st.node, "mean")]] = x.mean(axis=(0, 2, 3)).astype(DTYPE)
        overrides[feeding[(st.node, "variance")]] = x.var(axis=(0, 2, 3)).astype(DTYPE)
    for nid, value in overrides.items():
        node = page.nodes[nid]
        node.attrs = {**node.attrs, "initializer": "value", "initial_value": value}


def _without_skips(project):
    """A copy of the page whose residual units add nothing back: each AddN of a unit's branch and
    its shortcut keeps the branch only (a plain 50-layer network, as VGG is a plain 19)."""
    import copy

    page = copy.deepcopy(project.pages[0])
    page.name = "without_skips"
    for nid, node in list(page.nodes.items()):
        if node.block != "AddN":
            continue
        ins = sorted((e for e in page.edges if e.dst == nid), key=lambda e: e.dst_port)
        branch = ins[0]
        outs = [e for e in page.edges if e.src == nid]
        page.edges = [e for e in page.edges if e.dst != nid and e.src != nid]
        node.block, node.inputs = "Identity", {}
        node.label = "the branch only (the skip taken away)"
        page.edges.append(branch.__class__(branch.src, branch.src_port, nid, "input"))
        page.edges += [e.__class__(nid, "output", e.dst, e.dst_port) for e in outs]
    kept = set(page.edges)
    page.bends = {e: points for e, points in page.bends.items() if e in kept}
    return page


def _prune_unused(page) -> None:
    """Drop the blocks nothing on the way to the loss reads any more (a projection shortcut left
    without its AddN), and their frames' mentions."""
    markers = [nid for nid, n in page.nodes.items() if n.block == "Identity" and n.label.startswith("output")]
    keep, todo = set(), [page.loss, *markers]
    feeding = {}
    for e in page.edges:
        feeding.setdefault(e.dst, []).append(e.src)
    while todo:
        nid = todo.pop()
        if nid in keep:
            continue
        keep.add(nid)
        todo += feeding.get(nid, [])
    for nid in [n for n in page.nodes if n not in keep]:
        page.remove_node(nid)


def unit_gradients(project, page_name: str) -> dict:
    """{unit: the norm of the gradient of the loss arriving at the unit's output} and the first
    convolution's weight gradient norm, from one recorded backward run."""
    from blockflow.compile.compiler import compile_project
    from blockflow.run.runtime import run_backward

    page = project.page(page_name)
    program = compile_project(project, page_name)
    result = run_backward(program, record=True, commit=False)
    norms = {}
    for frame in page.frames:
        if not frame.title.startswith("res"):
            continue
        last = [nid for nid in frame.blocks if nid in page.nodes and page.nodes[nid].block in ("AddN", "Identity")]
        relu = [e.dst for e in page.edges if e.src in last and page.nodes[e.dst].block == "Relu"]
        g = result.grad(relu[0], "activations") if relu else None
        norms[frame.title] = float(np.linalg.norm(g)) if g is not None else 0.0
    first = result.variable_grads["conv1_w_0"]
    return {"units": norms, "conv1": float(np.linalg.norm(first)), "loss": float(result.value(page.loss))}


def _plain_copy(project):
    """The without_skips page: the first page's copy with its skips taken away, framed the same
    (the frames keep the blocks that remain)."""
    page = _without_skips(project)
    _prune_unused(page)
    page.frames = [f.__class__(f.title, f.color, f.note, tuple(b for b in f.blocks if b in page.nodes))
                   for f in page.frames if any(b in page.nodes for b in f.blocks)]
    return page


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _texts(with_skips: dict, without: dict) -> tuple[str, str]:
    u, v = with_skips["units"], without["units"]
    first, last = "res2_0", "res5_2"
    strongest = max(u, key=u.get)
    peak = max(v, key=v.get)
    main = [
        "ResNet-50, imported from the ONNX model the onnx package ships for its own tests "
        "(File > Import ONNX Model, or blockflow import onnx), made small enough to run in a moment: "
        f"one {SIDE} x {SIDE} image of three gratings instead of a 224 x 224 photograph, the weights drawn "
        "at random (He-normal) rather than stored, each batch norm's statistics measured on that image, as "
        f"after training, and each branch's last batch norm scaled by {BRANCH_SCALE:g}, as ResNets are "
        "started. The fifty layers are all there: a stem, then 16 bottleneck units in four stages (res2 to "
        "res5), each framed. The import added a loss, the cross-entropy against a label "
        f"(class {LABEL}), so Backward has a scalar to start from.",
        "Run Backward (or blockflow run sample_projects/resnet_gradients.bflow.json) and look at the wires: "
        "their colour is the size of the gradient of the loss. Every unit ends in an AddN: its branch "
        "(three convolutions) plus its input, carried around the branch by the skip connection. Going back, "
        "the AddN sends the gradient it receives to both, unchanged: the skip hands it straight to the unit "
        "below, and the branch adds its own share on top. So along the skips the gradient cannot die out: "
        f"here it grows from {_fmt(u[last])} at the output of {last} to {_fmt(u[first])} at the output of "
        f"{first}, and is strongest at the bottom ({strongest}), growing most across the units that "
        f"change the size; the first convolution's weights get a gradient of norm "
        f"{_fmt(with_skips['conv1'])}.",
        "Compare the page without_skips: the same weights and statistics, each AddN keeping the branch only "
        "(a plain 50-layer network, as VGG is a plain 19). There a unit's gradient is only what its branch "
        f"sends back, and each branch, started small, makes it smaller: it is largest at {peak} "
        f"({_fmt(v[peak])}), then shrinks unit after unit to {_fmt(v[first])} at the output of {first}, and "
        f"the first convolution's gradient is {_fmt(without['conv1'])}, "
        f"{with_skips['conv1'] / without['conv1']:,.0f} times smaller than the ResNet's: the first layers "
        "would hardly learn. This is the vanishing gradient that stopped plain networks at about twenty "
        "layers, and what the skip connections cure.",
        "Try it: set the scale of each branch's last batch norm (the Variables named res*_branch2c_bn_s_0) "
        "to zeros and run Backward again. Each unit then passes its input on through its last ReLU alone: "
        "the gradient goes down the skips through nothing but those ReLUs, except in the four units whose "
        "shortcut is a convolution (res2_0, res3_0, res4_0, res5_0, where the size changes).",
    ]
    plain = [
        "ResNet-50 without its skip connections: each unit's AddN keeps only its branch, the projection "
        "shortcuts that fed it are gone; the weights and batch-norm statistics are the first page's. Run "
        "Backward and compare the gradient sizes with the first page's.",
        f"The gradient at each unit's output, from {last} down to {first}: "
        + ", ".join(f"{k} {_fmt(v[k])}" for k in reversed(list(v))) + ".",
    ]
    return "\n\n".join(main), "\n\n".join(plain)


def resnet_gradients():
    """The sample project (see the module)."""
    project, report = _import_page()
    page = project.pages[0]
    _small_input(page, report)
    _drawn_weights(page)
    _calibrated(project, page.name)
    plain = _plain_copy(project)      # the same weights and statistics
    project.pages.append(plain)
    with_skips, without = unit_gradients(project, page.name), unit_gradients(project, plain.name)
    page.text, plain.text = _texts(with_skips, without)
    project.metadata = {
        "title": "Gradients through ResNet-50",
        "description": "ResNet-50 imported from ONNX: where the gradient is strongest, and what the skip "
                       "connections do to it (a second page takes them away).",
    }
    return project
