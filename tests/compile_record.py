"""Recorded compiles (issue 18, compile19): generated pages of every kind a compile meets, and a
fingerprint of what a compile of each gives, section by section (diagnostics, slots, steps,
wire types, port slots, the graph, gradient paths).

tests/data/compile_fingerprints.json holds the fingerprints the compile gave before it was
rewritten by dense block numbers (main at 22ecd9e); tests/test_compile_recorded.py compares.
``python tests/compile_record.py`` writes that file again (only when the compile's results are
meant to change).
"""
from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

import numpy as np

from blockflow.composite import Composite, block_name
from blockflow.project import Project
from blockflow.spec import Attr

RECORD = Path(__file__).parent / "data" / "compile_fingerprints.json"
SAMPLES = Path(__file__).resolve().parents[1] / "sample_projects"


def mixed(n: int, seed: int) -> Project:
    """A layered page of most kinds of input and output a block has: wired and inline inputs,
    optional and static ones, lists in and out, Variables stored or not, optimizer updates with
    slot state, gradient cutters, integer wires, saved feeds, and broken blocks and wires."""
    rng = random.Random(seed)
    p = Project()
    pg = p.add_page("mixed")
    floats, ints = [], []

    def src(pool):
        return pool[rng.randrange(max(0, len(pool) - 30), len(pool))]

    for i in range(n):
        nid = f"b{i}"
        r = rng.random()
        if i < 3 or r < 0.06:
            pg.add_node("Placeholder", id=nid, attrs={"shape": [4]})
            if rng.random() < 0.3:
                pg.feeds[nid] = np.arange(4, dtype=np.float32) * i
            floats.append((nid, "output"))
        elif r < 0.11:
            state = {"value": np.full(4, 0.5, np.float32)} if rng.random() < 0.5 else {}
            pg.add_node("Variable", id=nid, attrs={"shape": [4], "seed": rng.randrange(3),
                                                   "initializer": rng.choice(["zeros", "glorot_uniform"])},
                        state=state)
            floats.append((nid, "ref"))
            if rng.random() < 0.5:
                opt = f"{nid}_opt"
                kind = rng.choice(["ApplyGradientDescent", "ApplyAdam"])
                inputs = {"alpha": np.float32(0.1)} if kind == "ApplyGradientDescent" else {
                    "lr": np.float32(0.01), "beta1": np.float32(0.9), "beta2": np.float32(0.999),
                    "epsilon": np.float32(1e-7)}
                pg.add_node(kind, id=opt, inputs=inputs)
                pg.connect(nid, "ref", opt, "var")
                pg.connect(*src(floats), opt, "delta" if kind == "ApplyGradientDescent" else "grad")
        elif r < 0.14:
            pg.add_node("Cast", id=nid, attrs={"DstT": "int32"})
            pg.connect(*src(floats), nid, "x")
            ints.append((nid, "y"))
        elif r < 0.17 and ints:
            pg.add_node("Cast", id=nid, attrs={"DstT": "float32"})
            pg.connect(*src(ints), nid, "x")
            floats.append((nid, "y"))
        elif r < 0.20:
            pg.add_node("AddN", id=nid)
            for k in range(rng.randrange(1, 4)):
                pg.connect(*src(floats), nid, f"inputs[{k}]")
            floats.append((nid, "sum"))
        elif r < 0.22:
            pg.add_node("Unstack", id=nid, attrs={"num": 4, "axis": 0})
            pg.connect(*src(floats), nid, "value")
            pg.add_node("Stack", id=f"{nid}_s")
            for k in (2, 0):
                pg.connect(nid, f"output[{k}]", f"{nid}_s", f"values[{1 - k // 2}]")
            floats.append((f"{nid}_s", "output"))
        elif r < 0.25:
            pg.add_node(rng.choice(["StopGradient", "PreventGradient", "Identity"]), id=nid)
            pg.connect(*src(floats), nid, "input")
            floats.append((nid, "output"))
        elif r < 0.28:
            pg.add_node("Sum", id=nid, attrs={"keep_dims": rng.random() < 0.5},
                        inputs={"axis": np.int32(0)} if rng.random() < 0.5 else {})
            pg.connect(*src(floats), nid, "input")
            pg.add_node("Add", id=f"{nid}_b")
            pg.connect(nid, "output", f"{nid}_b", "x")
            pg.connect(*src(floats), f"{nid}_b", "y")
            floats.append((f"{nid}_b", "z"))
        elif r < 0.31:
            pg.add_node("Equal", id=nid)
            pg.connect(*src(floats), nid, "x")
            pg.connect(*src(floats), nid, "y")
            pg.add_node("Select", id=f"{nid}_s")
            pg.connect(nid, "z", f"{nid}_s", "condition")
            pg.connect(*src(floats), f"{nid}_s", "t")
            pg.connect(*src(floats), f"{nid}_s", "e")
            floats.append((f"{nid}_s", "output"))
        elif r < 0.32:
            _broken(rng, pg, nid, floats)
        elif r < 0.5:
            pg.add_node("Multiply", id=nid, inputs={"y": rng.choice([np.float32(2.0), np.float64(-0.0), 3])})
            pg.connect(*src(floats), nid, "x")
            floats.append((nid, "z"))
        elif r < 0.75:
            pg.add_node("Add", id=nid, attrs={"name": "x"} if rng.random() < 0.02 else {})
            pg.connect(*src(floats), nid, "x")
            pg.connect(*src(floats), nid, "y")
            floats.append((nid, "z"))
        else:
            pg.add_node(rng.choice(["Tanh", "Sigmoid", "Relu"]), id=nid)
            port = {"Relu": "features"}.get(pg.nodes[nid].block, "x")
            pg.connect(*src(floats), nid, port)
            floats.append((nid, "activations" if port == "features" else "y"))
    pg.add_node("Sum", id="loss")
    pg.connect(*floats[-1], "loss", "input")
    pg.loss = "loss"
    return p


def _broken(rng, pg, nid, floats) -> None:
    """One of the mistakes a drawn page holds."""
    kind = rng.randrange(7)
    if kind == 0:
        pg.add_node("Tanhh", id=nid)                      # unknown block
        pg.connect(*floats[-1], nid, "x")
        floats.append((nid, "y"))
    elif kind == 1:
        pg.add_node("Tanh", id=nid, attrs={"bogus": 1})   # unknown attr
        pg.connect(*floats[-1], nid, "x")
        floats.append((nid, "y"))
    elif kind == 2:
        pg.add_node("Add", id=nid)                        # an input missing
        pg.connect(*floats[-1], nid, "x")
        floats.append((nid, "z"))
    elif kind == 3:
        pg.add_node("Tanh", id=nid)                       # fed twice
        pg.connect(*floats[-1], nid, "x")
        pg.connect(*floats[-2], nid, "x")
        floats.append((nid, "y"))
    elif kind == 4:
        pg.add_node("Tanh", id=nid)                       # from a port its source lacks
        pg.connect(floats[-1][0], "nope", nid, "x")
        floats.append((nid, "y"))
    elif kind == 5:
        pg.add_node("Multiply", id=nid, inputs={"x": np.float32(1.0)})   # wired and inline
        pg.connect(*floats[-1], nid, "x")
        pg.connect(*floats[-1], nid, "y")
        floats.append((nid, "z"))
    else:
        pg.add_node("Add", id=nid)                        # int meets float
        pg.add_node("Cast", id=f"{nid}_i", attrs={"DstT": "int32"})
        pg.connect(*floats[-1], f"{nid}_i", "x")
        pg.connect(f"{nid}_i", "y", nid, "x")
        pg.connect(*floats[-1], nid, "y")
        floats.append((nid, "z"))


def with_cycle(n: int, seed: int) -> Project:
    p = mixed(n, seed)
    pg = p.page()
    pg.add_node("Add", id="c1")
    pg.add_node("Tanh", id="c2")
    pg.connect("c1", "z", "c2", "x")
    pg.connect("c2", "y", "c1", "x")
    pg.connect("b0", "output", "c1", "y")
    return p


def chain_composite() -> Composite:
    """An Input sized by a named dimension, a Variable of that size, Tanh/Add/Multiply mixing it
    in, an Output (benchmarks/composites.py's Chain, smaller)."""
    comp = Composite("Chain", params=[Attr("scale", "float", 1.0)])
    p = comp.page
    p.add_node("Input", id="x", attrs={"name": "x", "dtype": "float32", "shape": ["n"]})
    p.add_node("Variable", id="w", attrs={"shape": [{"$dim": "n"}], "initializer": "glorot_uniform", "seed": 3})
    prev = ("x", "output")
    for i in range(7):
        kind = ("Tanh", "Add", "Multiply")[i % 3]
        nid = f"op{i}"
        p.add_node(kind, id=nid)
        p.connect(*prev, nid, "x")
        if kind != "Tanh":
            p.connect("w", "ref", nid, "y")
        prev = (nid, "y" if kind == "Tanh" else "z")
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.connect(*prev, "y", "input")
    return comp


def instances(n: int, seed: int) -> Project:
    """Instances of Chain fed by each other and by Placeholders of two widths, some sharing
    their Variables, one with a parameter of the wrong kind."""
    rng = random.Random(seed)
    p = Project()
    p.composites["Chain"] = chain_composite()
    pg = p.add_page("instances")
    outs = {4: [], 6: []}
    for w in (4, 6):
        for i in range(2):
            pg.add_node("Placeholder", id=f"x{w}_{i}", attrs={"shape": [w]})
            outs[w].append((f"x{w}_{i}", "output"))
    firsts = {}
    for i in range(n):
        nid, w = f"c{i}", rng.choice((4, 6))
        attrs = {"scale": 1.0}
        if i == n // 2:
            attrs = {"scale": "big"}
        elif w in firsts and rng.random() < 0.3:
            attrs = dict(attrs, share_variables_with=firsts[w])
        pg.add_node(block_name("Chain"), id=nid, attrs=attrs)
        pg.connect(*outs[w][rng.randrange(max(0, len(outs[w]) - 20), len(outs[w]))], nid, "x")
        firsts.setdefault(w, nid)
        outs[w].append((nid, "y"))
    pg.add_node("Sum", id="loss")
    pg.connect(*outs[4][-1], "loss", "input")
    pg.loss = "loss"
    return p


def generated_pages():
    """(name, project) of every recorded compile."""
    pages = [(f"mixed-{n}-{seed}", mixed(n, seed)) for n, seed in ((40, 1), (300, 2), (2500, 3), (6000, 4))]
    pages += [("cycle-200-5", with_cycle(200, 5)), ("instances-60-6", instances(60, 6)),
              ("instances-400-7", instances(400, 7))]
    return pages


def sample_pages():
    from blockflow.io.project_io import load_project

    for path in sorted(SAMPLES.glob("*.bflow.json")):
        yield path.name, load_project(path)


def _digest(items) -> str:
    h = hashlib.sha256()
    for item in items:
        h.update(repr(item).encode())
        h.update(b"\n")
    return h.hexdigest()[:20]


def _value(v):
    if v is None:
        return None
    a = np.asarray(v)
    return (a.dtype.str, a.shape, hashlib.sha256(a.tobytes()).hexdigest()[:12])


def _type(t):
    return None if t is None else (str(t), _value(t.value))


def _static(v):
    return _value(v) if isinstance(v, np.ndarray) else repr(v)


def _diagnostic(d) -> str:
    # networkx names a cycle from the member its set of members yields first, which depends on
    # the process's string hashing (PYTHONHASHSEED): compared by its members
    if d.message.startswith("is part of a cycle: "):
        return f"{d.where}: cycle of {sorted(set(d.message[20:].split(' -> ')))}"
    return str(d)


def fingerprint(program) -> dict:
    """Section name -> digest of what a compile of one page gave."""
    out = {
        "diagnostics": _digest(map(_diagnostic, program.diagnostics)),
        "slots": _digest((s.index, s.node, s.port, _type(s.type), s.const, s.state) for s in program.slots),
        "steps": _digest((s.index, s.node, s.spec.name, sorted((k, _static(v)) for k, v in s.attrs.items()),
                          s.inputs, [_static(v) for v in s.static], s.outputs, s.in_edges, s.out_struct,
                          s.out_decl, s.refs) for s in program.steps),
        "edge_types": _digest((e, str(t)) for e, t in program.edge_types.items()),
        "port_slots": _digest(program.port_slots.items()),
        "graph": _digest([list(program.graph.nodes), list(program.graph.edges)]),
        "state": _digest([sorted(program.trainable), sorted(program.variable_values),
                          sorted(program.feeds), sorted(program.slot_values), sorted(program.stored_variables)]),
    }
    targets = []
    if program.loss is not None and program.loss[0] in program.step_of:
        targets.append(None)
    if program.steps and program.steps[-1].outputs:
        targets.append(program.steps[-1].node)
    for k, target in enumerate(targets):
        for wrt in (None, sorted(program.trainable)[:3]):
            paths = program.gradient_paths(target, wrt)
            out[f"paths{k}{'' if wrt is None else 'w'}"] = _digest([
                sorted(paths.flows), list(paths.cut_reasons.items()), list(paths.cut.items()),
                sorted(paths.unreached), sorted(paths.slots), paths.sources, list(paths.cut_sources.items()),
                list(paths.needs.items()), paths.prevented, bytes(paths.live), bytes(paths.strict)])
    return out


def fingerprints() -> dict:
    from blockflow.compile.compiler import compile_project

    out = {}
    for name, project in [*generated_pages(), *sample_pages()]:
        for page in project.pages:
            out[f"{name}/{page.name}"] = fingerprint(compile_project(project, page.name))
    return out


if __name__ == "__main__":
    RECORD.write_text(json.dumps(fingerprints(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORD}", file=sys.stderr)
