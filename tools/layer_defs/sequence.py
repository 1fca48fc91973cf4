"""The library's sequence, attention, residual and loss layers, built as composites.

Each builder returns a :class:`blockflow.composite.Composite` whose ``origin`` names this library
and the layer's version (raise it when a layer's diagram changes: saved projects pin the version
they were made from). The conventions are Keras' (TF 2) unless a docstring says otherwise; every
layer's forward pass and gradients are checked against hand-written numpy in
tests/test_layers_sequence.py.

A composite's diagram is fixed, its parameters fill in attr values only; so sizes that are sums
or products of parameters (an LSTM's ``4 * units`` gate columns) are kept as separate axes of
the Variables instead (``[4, features, units]``), which is Keras' kernel reshaped.
"""
from __future__ import annotations

import numpy as np

from blockflow.composite import Composite, block_name
from blockflow.spec import Attr

LIBRARY = "blockflow"
#: the grid the diagrams are drawn on: column, row -> position
DX, DY = 190.0, 110.0


def P(name: str) -> dict:
    """A reference to the composite's parameter ``name``."""
    return {"$param": name}


def D(name: str) -> dict:
    """A reference to the named dimension ``name`` of the composite's Input shapes."""
    return {"$dim": name}


class _Draw:
    """Draws a definition's diagram on a grid: blocks at (column, row), wired per input port from
    ``"node.port"`` sources."""

    def __init__(self, comp: Composite):
        self.page = comp.page

    def add(self, block: str, id: str, at, *, attrs=None, inputs=None, wires=None, label="") -> str:
        col, row = at
        self.page.add_node(block, id=id, attrs=attrs or {}, inputs=inputs,
                           position=(col * DX, row * DY), label=label)
        for port, src in (wires or {}).items():
            node, _, out = src.partition(".")
            self.page.connect(node, out, id, port)
        return id

    def input(self, name: str, shape, at, *, dtype="float32", doc="") -> str:
        return self.add("Input", name, at, attrs={"name": name, "dtype": dtype, "shape": shape, "doc": doc})

    def output(self, name: str, src: str, at, shape, *, dtype="float32", doc="") -> str:
        """An output port declaring what it gives (checked when compiling, shown in the docs)."""
        attrs = {"name": name, "dtype": dtype, "shape": shape, "doc": doc}
        return self.add("Output", f"{name}_out", at, attrs=attrs, wires={"input": src})

    def const(self, id: str, value, at, dtype="float32", label="") -> str:
        return self.add("Const", id, at, attrs={"value": value, "dtype": dtype}, label=label)

    def variable(self, id: str, shape, at, init="zeros", seed=0, label="") -> str:
        attrs = {"shape": shape, "initializer": init}
        if seed:
            attrs["seed"] = seed
        return self.add("Variable", id, at, attrs=attrs, label=label)


def layer(category: str, version: int):
    """Mark a builder with its library category and its version (tools/make_layers.py reads
    both); the version goes into the origin of the Composite it builds."""
    def mark(fn):
        fn.category, fn.version = category, version
        return fn
    return mark


def _layer(builder, name: str, doc: str, params) -> Composite:
    """None of these layers has a training mode (no dropout, no batch statistics): their docs
    say so, as the library's other layers do."""
    doc = " ".join(doc.split()) + " Training and inference behave alike."
    return Composite(name, doc=doc, params=list(params),
                     origin={"library": LIBRARY, "name": name, "version": builder.version})


def _units(doc="output features (the state's width)"):
    return Attr("units", "int", 32, min=1, doc=doc)


def _forget_bias():
    return Attr("forget_bias", "float", 1.0,
                doc="added to the forget gate's input (Keras' unit_forget_bias; 0 to turn it off)")


# ------------------------------------------------------------------------------- recurrent cells
@layer("recurrent", 1)
def lstm_cell() -> Composite:
    """One step of an LSTM: Keras' LSTMCell (gates i, f, c, o; sigmoid and tanh)."""
    comp = _layer(lstm_cell, "LSTMCell", """
        One step of a long short-term memory: from x [batch, features] and the state h, c [batch,
        units], gates z = x·W + h·U + b split as Keras orders them (input i, forget f, candidate g,
        output o); c_next = σ(f)·c + σ(i)·tanh(g), h_next = σ(o)·tanh(c_next). forget_bias is
        added to the forget gate (as TF's LSTMCell; the same at the start as Keras'
        unit_forget_bias, which puts it in the trained bias instead). W [4, features, units],
        U [4, units, units] and b [4, units] are Keras' kernel, recurrent_kernel and bias with
        the gate axis first: W = kernel.reshape(features, 4, units).transpose(1, 0, 2), U
        likewise, b = bias.reshape(4, units) less forget_bias in row 1. W and U are drawn
        glorot_uniform over the stacked gates (Keras draws U orthogonal), b zeros.""",
        [_units(), _forget_bias()])
    d = _Draw(comp)
    u = P("units")
    d.input("x", ["batch", "features"], (0, 0), doc="the input at this step")
    d.input("h", ["batch", u], (0, 2), doc="the previous output")
    d.input("c", ["batch", u], (0, 5.9), doc="the previous cell state")
    d.variable("W", [4, D("features"), u], (0, 1), "glorot_uniform", 1, "kernel")
    d.variable("U", [4, u, u], (0, 3), "glorot_uniform", 2, "recurrent kernel")
    d.add("Einsum", "xW", (1, 0), attrs={"equation": "bf,gfu->bgu"}, wires={"inputs[0]": "x.output",
                                                                          "inputs[1]": "W.ref"})
    d.add("Einsum", "hU", (1, 2), attrs={"equation": "bh,ghu->bgu"}, wires={"inputs[0]": "h.output",
                                                                          "inputs[1]": "U.ref"})
    d.variable("b", [4, u], (1, 3.4), label="bias")
    d.const("fb", [[0.0], [P("forget_bias")], [0.0], [0.0]], (1, 4.4), label="forget bias")
    d.add("Add", "bias", (2, 3.4), wires={"x": "b.ref", "y": "fb.output"})
    d.add("AddN", "zsum", (2, 1), wires={"inputs[0]": "xW.output", "inputs[1]": "hU.output"})
    d.add("Add", "z", (3, 1), wires={"x": "zsum.sum", "y": "bias.z"}, label="gates")
    d.add("Unstack", "gates", (4, 1), attrs={"num": 4, "axis": 1}, wires={"value": "z.z"})
    for k, (gate, act) in enumerate((("i", "Sigmoid"), ("f", "Sigmoid"), ("g", "Tanh"), ("o", "Sigmoid"))):
        d.add(act, gate, (5, k), wires={"x": f"gates.output[{k}]"})
    d.add("Multiply", "fc", (6, 4.8), wires={"x": "f.y", "y": "c.output"})
    d.add("Multiply", "ig", (6, 3.5), wires={"x": "i.y", "y": "g.y"})
    d.add("Add", "c_new", (7, 4.1), wires={"x": "fc.z", "y": "ig.z"})
    d.add("Tanh", "tanh_c", (8, 3.6), wires={"x": "c_new.z"})
    d.add("Multiply", "h_new", (9, 3), wires={"x": "o.y", "y": "tanh_c.y"})
    d.output("h_next", "h_new.z", (10, 3), ["batch", u], doc="the output, the next step's h")
    d.output("c_next", "c_new.z", (10, 4.6), ["batch", u], doc="the next step's cell state")
    return comp


@layer("recurrent", 1)
def gru_cell() -> Composite:
    """One step of a GRU: Keras' GRUCell with reset_after=True (TF 2's default, cuDNN's)."""
    comp = _layer(gru_cell, "GRUCell", """
        One step of a gated recurrent unit, Keras' GRUCell with reset_after=True (TF 2's
        default): from x [batch, features] and h [batch, units], update z, reset r and candidate
        n gates (Keras' order) with separate input and recurrent biases; r multiplies the
        recurrent part after its matrix product: n = tanh(x·W_n + b_n + r·(h·U_n + c_n)),
        h_next = z·h + (1 − z)·n. W [3, features, units], U [3, units, units], b and c [3, units]
        are Keras' kernel, recurrent_kernel and bias [2, 3 units] with the gate axis first: W =
        kernel.reshape(features, 3, units).transpose(1, 0, 2), U likewise, b =
        bias[0].reshape(3, units), c = bias[1].reshape(3, units). W and U are drawn
        glorot_uniform over the stacked gates (Keras draws U orthogonal), b and c zeros.""",
        [_units()])
    d = _Draw(comp)
    u = P("units")
    d.input("x", ["batch", "features"], (0, 0), doc="the input at this step")
    d.input("h", ["batch", u], (0, 3), doc="the previous output")
    d.variable("W", [3, D("features"), u], (0, 1), "glorot_uniform", 1, "kernel")
    d.variable("U", [3, u, u], (0, 4), "glorot_uniform", 2, "recurrent kernel")
    d.variable("b", [3, u], (1, 1.3), label="input bias")
    d.variable("c", [3, u], (1, 4.3), label="recurrent bias")
    d.add("Einsum", "xW", (1, 0), attrs={"equation": "bf,gfu->bgu"}, wires={"inputs[0]": "x.output",
                                                                          "inputs[1]": "W.ref"})
    d.add("Einsum", "hU", (1, 3), attrs={"equation": "bh,ghu->bgu"}, wires={"inputs[0]": "h.output",
                                                                          "inputs[1]": "U.ref"})
    d.add("Add", "xg", (2, 0), wires={"x": "xW.output", "y": "b.ref"})
    d.add("Add", "hg", (2, 3), wires={"x": "hU.output", "y": "c.ref"})
    d.add("Unstack", "xs", (3, 0), attrs={"num": 3, "axis": 1}, wires={"value": "xg.z"})
    d.add("Unstack", "hs", (3, 3), attrs={"num": 3, "axis": 1}, wires={"value": "hg.z"})
    d.add("Add", "zr_z", (4, 0), wires={"x": "xs.output[0]", "y": "hs.output[0]"})
    d.add("Add", "zr_r", (4, 1), wires={"x": "xs.output[1]", "y": "hs.output[1]"})
    d.add("Sigmoid", "z", (5, 0), wires={"x": "zr_z.z"}, label="update gate")
    d.add("Sigmoid", "r", (5, 1), wires={"x": "zr_r.z"}, label="reset gate")
    d.add("Multiply", "rh", (5, 3), wires={"x": "r.y", "y": "hs.output[2]"})
    d.add("Add", "npre", (6, 2), wires={"x": "xs.output[2]", "y": "rh.z"})
    d.add("Tanh", "n", (7, 2), wires={"x": "npre.z"}, label="candidate")
    # h_next = n + z·(h − n): z·h + (1 − z)·n in three blocks
    d.add("Subtract", "h_n", (8, 3.2), wires={"x": "h.output", "y": "n.y"})
    d.add("Multiply", "zd", (9, 1), wires={"x": "z.y", "y": "h_n.z"})
    d.add("Add", "h_new", (10, 2), wires={"x": "n.y", "y": "zd.z"})
    d.output("h_next", "h_new.z", (11, 2), ["batch", u], doc="the output, the next step's h")
    return comp


# ------------------------------------------------------------------------------- unrolled LSTM
@layer("recurrent", 1)
def lstm(steps: int = 8) -> Composite:
    """An LSTM layer unrolled over ``steps`` time steps: ``steps`` LSTMCell instances sharing the
    first one's Variables; the initial state is zeros (Keras' default)."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"an LSTM needs at least 1 step, not {steps!r}")
    comp = _layer(lstm, "LSTM", f"""
        An LSTM over a sequence of {steps} steps, as Keras' LSTM: x [batch, {steps}, features] is
        cut into steps, each fed to an LSTMCell with the previous step's h and c (zeros at the
        first); every cell uses the first cell's Variables (share_variables_with), so the layer
        has one kernel, one recurrent kernel and one bias, and their gradients add up over the
        steps. Outputs: the sequence of h [batch, {steps}, units] (Keras' return_sequences), and
        the last h and c (return_state). The number of steps is the diagram's: the layer is made
        for {steps} (tools/layer_defs/sequence.py's lstm(steps) makes another).""",
        [_units(), _forget_bias()])
    d = _Draw(comp)
    d.input("x", ["batch", steps, "features"], (0, 0), doc=f"the sequence [batch, {steps}, features]")
    d.add("Unstack", "steps", (1, 0), attrs={"num": steps, "axis": 1}, wires={"value": "x.output"})
    # The zero state [batch, units] is made from the first step's zeros so that the batch size
    # may stay open (datasets give [?, ...]): zeros [batch, features] times a [units] vector.
    d.add("ZerosLike", "x0zero", (1, 3.6), wires={"x": "steps.output[0]"})
    d.const("ushape", [P("units")], (0, 4.6), dtype="int32", label="[units]")
    d.add("Fill", "uzero", (1, 4.6), inputs={"value": np.float32(0)}, wires={"dims": "ushape.output"})
    d.add("Einsum", "zeros", (2, 4), attrs={"equation": "bf,u->bu"},
          wires={"inputs[0]": "x0zero.y", "inputs[1]": "uzero.output"}, label="initial state")
    h, c = "zeros.output", "zeros.output"
    cell = block_name("LSTMCell")
    for t in range(steps):
        attrs = {"units": P("units"), "forget_bias": P("forget_bias")}
        if t:
            attrs["share_variables_with"] = "cell0"
        d.add(cell, f"cell{t}", (3 + 1.3 * t, 1 + 1.4 * (t % 2)), attrs=attrs, label=f"step {t}",
              wires={"x": f"steps.output[{t}]", "h": h, "c": c})
        h, c = f"cell{t}.h_next", f"cell{t}.c_next"
    d.add("Stack", "seq", (3 + 1.3 * steps, 0), attrs={"axis": 1},
          wires={f"values[{t}]": f"cell{t}.h_next" for t in range(steps)})
    d.output("sequence", "seq.output", (4 + 1.3 * steps, 0), ["batch", steps, P("units")],
             doc="h at every step (Keras' return_sequences)")
    d.output("h", h, (4 + 1.3 * steps, 2.2), ["batch", P("units")], doc="the last step's h")
    d.output("c", c, (4 + 1.3 * steps, 3.4), ["batch", P("units")], doc="the last step's cell state")
    return comp


# ------------------------------------------------------------------------------- attention
@layer("attention", 1)
def multi_head_attention() -> Composite:
    """Keras' MultiHeadAttention (projections as its EinsumDense layers, scaled dot product,
    softmax over the keys, optional causal mask, output projection back to the query's width)."""
    comp = _layer(multi_head_attention, "MultiHeadAttention", """
        Multi-head attention as Keras' MultiHeadAttention: query [batch, tq, dim], key and value
        [batch, tk, ·] (wire value into key too for Keras' default key=value) are projected to
        num_heads heads of key_dim (W [width, heads, key_dim] plus a bias, Keras' EinsumDense
        kernels); scores = q·k / sqrt(key_dim) per head, softmax over the keys; with causal,
        query i sees keys j <= i only (masked scores get −1e9, as Keras); the heads' weighted
        values are projected back to the query's width dim. Outputs: the result
        [batch, tq, dim] and the attention weights [batch, heads, tq, tk] (Keras'
        return_attention_scores). The value heads use key_dim too (Keras' value_dim default); no
        dropout. The Variables have the shapes of Keras' weights (query, key, value kernels
        [width, heads, key_dim] and biases [heads, key_dim], output kernel [heads, key_dim, dim]
        and bias [dim]): Keras' weights load as they are.""",
        [Attr("num_heads", "int", 2, min=1, doc="the number of attention heads"),
         Attr("key_dim", "int", 16, min=1, doc="the size of each head (query, key and value)"),
         Attr("causal", "bool", False, doc="query i attends to keys j <= i only (Keras' use_causal_mask)")])
    d = _Draw(comp)
    h, k = P("num_heads"), P("key_dim")
    d.input("query", ["batch", "tq", "dim"], (0, 0), doc="the sequence that asks [batch, tq, dim]")
    d.input("key", ["batch", "tk", "kdim"], (0, 2.4), doc="what the scores compare with [batch, tk, kdim]")
    d.input("value", ["batch", "tk", "vdim"], (0, 4.8), doc="what is averaged [batch, tk, vdim]")
    for row, (name, width) in enumerate((("query", "dim"), ("key", "kdim"), ("value", "vdim"))):
        v = name[0]
        d.variable(f"W{v}", [D(width), h, k], (0, 2.4 * row + 1.1), "glorot_uniform", 1 + row, f"{name} kernel")
        d.variable(f"b{v}", [h, k], (1, 2.4 * row + 1.3), label=f"{name} bias")
        d.add("Einsum", f"{v}W", (1, 2.4 * row), attrs={"equation": "abc,cde->abde"},
              wires={"inputs[0]": f"{name}.output", "inputs[1]": f"W{v}.ref"})
        d.add("Add", v, (2, 2.4 * row), wires={"x": f"{v}W.output", "y": f"b{v}.ref"}, label=f"{name} heads")
    d.const("kd", k, (2, 1.1), label="key_dim")
    d.add("Rsqrt", "scale", (3, 1.1), wires={"x": "kd.output"})
    d.add("Multiply", "qs", (3, 0), wires={"x": "q.z", "y": "scale.y"})
    d.add("Einsum", "dots", (4, 1.5), attrs={"equation": "aecd,abcd->acbe"},
          wires={"inputs[0]": "k.z", "inputs[1]": "qs.z"}, label="scores")
    _causal_mask(d)
    d.add("Add", "masked", (9, 1.5), wires={"x": "dots.output", "y": "adder.z"})
    d.add("Softmax", "weights", (10, 1.5), wires={"logits": "masked.z"}, label="attention weights")
    d.add("Einsum", "ctx", (11, 3.5), attrs={"equation": "acbe,aecd->abcd"},
          wires={"inputs[0]": "weights.softmax", "inputs[1]": "v.z"}, label="heads' values")
    d.variable("Wo", [h, k, D("dim")], (11, 5), "glorot_uniform", 4, "output kernel")
    d.variable("bo", [D("dim")], (12, 5), label="output bias")
    d.add("Einsum", "oW", (12, 3.5), attrs={"equation": "abcd,cde->abe"},
          wires={"inputs[0]": "ctx.output", "inputs[1]": "Wo.ref"})
    d.add("Add", "o", (13, 3.5), wires={"x": "oW.output", "y": "bo.ref"})
    d.output("output", "o.z", (14, 3.5), ["batch", "tq", "dim"], doc="the attention's result")
    d.output("scores", "weights.softmax", (14, 1.5), ["batch", h, "tq", "tk"],
             doc="the attention weights, per head (Keras' return_attention_scores)")
    return comp


def _causal_mask(d: _Draw) -> None:
    """``adder`` [tq, tk]: −1e9 where key j > query i and ``causal`` is on, else 0 (Keras adds
    (1 − mask)·−1e9 to the scores). Drawn in every instance; with causal off it adds zeros."""
    d.const("tq", D("tq"), (1, 7.6), dtype="int32", label="tq")
    d.const("tk", D("tk"), (1, 8.8), dtype="int32", label="tk")
    one, zero = np.int32(1), np.int32(0)
    d.add("Range", "i", (2, 7.6), inputs={"start": zero, "delta": one}, wires={"limit": "tq.output"},
          label="query positions")
    d.add("ExpandDims", "icol", (3, 7.6), inputs={"axis": one}, wires={"input": "i.output"})
    d.add("Range", "j", (2, 8.8), inputs={"start": zero, "delta": one}, wires={"limit": "tk.output"},
          label="key positions")
    d.add("LessEqual", "past", (4, 8.2), wires={"x": "j.output", "y": "icol.output"}, label="j <= i")
    d.const("causal", P("causal"), (3, 6.4), dtype="bool", label="causal")
    d.add("LogicalNot", "open", (4, 6.6), wires={"x": "causal.output"})
    d.add("LogicalOr", "seen", (5, 7.4), wires={"x": "past.z", "y": "open.y"}, label="may attend")
    d.add("LogicalNot", "hidden", (6, 7.4), wires={"x": "seen.z"})
    d.add("Cast", "hidden_f", (7, 7.4), attrs={"DstT": "float32"}, wires={"x": "hidden.y"})
    d.const("neg", -1e9, (7, 8.6), label="−1e9")
    d.add("Multiply", "adder", (8, 7.8), wires={"x": "hidden_f.y", "y": "neg.output"}, label="mask")


# ------------------------------------------------------------------------------- residual
@layer("core", 1)
def residual_dense() -> Composite:
    """A residual block of two Dense layers: y = relu(x + W2·relu(W1·x + b1) + b2)."""
    comp = _layer(residual_dense, "ResidualDense", """
        A residual block, y = relu(x + F(x)) with F(x) = relu(x·W1 + b1)·W2 + b2 (two Dense
        layers, the second back to x's width): the identity path carries the gradient past F,
        so a deep stack of these keeps its gradients (the vanishing-gradients sample). W1
        [features, units] and W2 [units, features] are drawn glorot_uniform, the biases zeros.""",
        [_units("the hidden layer's width")])
    d = _Draw(comp)
    u, f = P("units"), D("features")
    d.input("x", ["batch", "features"], (0, 2.4), doc="the input [batch, features]")
    d.variable("W1", [f, u], (0, 1.1), "glorot_uniform", 1)
    d.variable("b1", [u], (1, 1.4))
    d.variable("W2", [u, f], (3, 1.2), "glorot_uniform", 2)
    d.variable("b2", [f], (4, 1.4))
    d.add("MatMul", "mm1", (1, 0), wires={"a": "x.output", "b": "W1.ref"})
    d.add("BiasAdd", "h1", (2, 0), wires={"value": "mm1.product", "bias": "b1.ref"})
    d.add("Relu", "a1", (3, 0), wires={"features": "h1.output"})
    d.add("MatMul", "mm2", (4, 0), wires={"a": "a1.activations", "b": "W2.ref"})
    d.add("BiasAdd", "fx", (5, 0), wires={"value": "mm2.product", "bias": "b2.ref"}, label="F(x)")
    d.add("Add", "sum", (6, 2.2), wires={"x": "x.output", "y": "fx.output"}, label="x + F(x)")
    d.add("Relu", "act", (7, 2.2), wires={"features": "sum.z"})
    d.output("y", "act.activations", (8, 2.2), ["batch", "features"], doc="relu(x + F(x))")
    return comp


# ------------------------------------------------------------------------------- losses
def _loss(builder, name: str, doc: str, params=()) -> tuple[Composite, _Draw]:
    comp = _layer(builder, name, doc, params)
    return comp, _Draw(comp)


def _mean_out(d: _Draw, src: str, col: int) -> None:
    d.add("Mean", "mean", (col, 1), wires={"input": src}, label="mean over all entries")
    d.output("loss", "mean.output", (col + 1, 1), [], doc="the mean loss, a scalar")


@layer("losses", 1)
def softmax_cross_entropy() -> Composite:
    comp, d = _loss(softmax_cross_entropy, "SoftmaxCrossEntropy", """
        The mean cross-entropy between labels (one-hot, or any probabilities over the classes)
        and the softmax of logits [batch, classes]: Keras' CategoricalCrossentropy
        (from_logits=True). Its gradient to the logits is (softmax − labels) / batch.""")
    d.input("logits", ["batch", "classes"], (0, 0), doc="unnormalised scores [batch, classes]")
    d.input("labels", ["batch", "classes"], (0, 2), doc="one-hot or probabilities [batch, classes]")
    d.add("SoftmaxCrossEntropyWithLogits", "xent", (1, 1),
          wires={"features": "logits.output", "labels": "labels.output"})
    _mean_out(d, "xent.loss", 2)
    return comp


@layer("losses", 1)
def sparse_softmax_cross_entropy() -> Composite:
    comp, d = _loss(sparse_softmax_cross_entropy, "SparseSoftmaxCrossEntropy", """
        The mean cross-entropy between integer class labels [batch] and the softmax of logits
        [batch, classes]: Keras' SparseCategoricalCrossentropy (from_logits=True). A label outside
        0..classes−1 is an error naming it.""")
    d.input("logits", ["batch", "classes"], (0, 0), doc="unnormalised scores [batch, classes]")
    d.input("labels", ["batch"], (0, 2), dtype="int32", doc="class indices [batch], int32 (Cast others)")
    d.add("SparseSoftmaxCrossEntropyWithLogits", "xent", (1, 1),
          wires={"features": "logits.output", "labels": "labels.output"})
    _mean_out(d, "xent.loss", 2)
    return comp


@layer("losses", 1)
def sigmoid_cross_entropy() -> Composite:
    comp, d = _loss(sigmoid_cross_entropy, "SigmoidCrossEntropy", """
        The mean logistic loss of logits against labels in [0, 1] (any shape, the same for
        both), computed without overflow: Keras' BinaryCrossentropy (from_logits=True).""")
    d.input("logits", None, (0, 0), doc="unnormalised scores, any shape")
    d.input("labels", None, (0, 2), doc="targets in [0, 1], logits' shape")
    d.add("SigmoidCrossEntropyWithLogits", "xent", (1, 1),
          wires={"logits": "logits.output", "labels": "labels.output"})
    _mean_out(d, "xent.output", 2)
    return comp


@layer("losses", 1)
def mean_squared_error() -> Composite:
    comp, d = _loss(mean_squared_error, "MSE", """
        The mean of (prediction − target)² over every entry (any shape, the same for both):
        Keras' MeanSquaredError. Its gradient to the prediction is 2·(prediction − target) / n,
        n the number of entries.""")
    d.input("prediction", None, (0, 0), doc="the model's output, any shape")
    d.input("target", None, (0, 2), doc="what it should be, the prediction's shape")
    d.add("SquaredDifference", "sq", (1, 1), wires={"x": "prediction.output", "y": "target.output"})
    _mean_out(d, "sq.z", 2)
    return comp


@layer("losses", 1)
def huber() -> Composite:
    comp, d = _loss(huber, "Huber", """
        The mean Huber loss of prediction against target: with e = |prediction − target|,
        e²/2 where e <= delta and delta·(e − delta/2) beyond (written as Keras does: q = min(e,
        delta), q²/2 + delta·(e − q)); quadratic near 0, linear for outliers. Keras' Huber.""",
        [Attr("delta", "float", 1.0, min=1e-6, doc="where the loss turns from quadratic to linear (> 0)")])
    d.input("prediction", None, (0, 0), doc="the model's output, any shape")
    d.input("target", None, (0, 2), doc="what it should be, the prediction's shape")
    d.add("Subtract", "err", (1, 1), wires={"x": "prediction.output", "y": "target.output"})
    d.add("Abs", "e", (2, 1), wires={"x": "err.z"})
    d.const("delta", P("delta"), (2, 2), label="delta")
    d.add("Minimum", "q", (3, 1), wires={"x": "e.y", "y": "delta.output"}, label="quadratic part")
    d.add("Subtract", "lin", (4, 2), wires={"x": "e.y", "y": "q.z"}, label="linear part")
    d.add("Square", "q2", (4, 0), wires={"x": "q.z"})
    d.const("half", 0.5, (4, 1))
    d.add("Multiply", "q2h", (5, 0), wires={"x": "q2.y", "y": "half.output"})
    d.add("Multiply", "dlin", (5, 2), wires={"x": "lin.z", "y": "delta.output"})
    d.add("Add", "each", (6, 1), wires={"x": "q2h.z", "y": "dlin.z"}, label="per entry")
    _mean_out(d, "each.z", 7)
    return comp


#: the builders tools/make_layers.py writes into blocks/layers/ (a layer after those it uses)
LAYERS = [lstm_cell, gru_cell, lstm, multi_head_attention, residual_dense, softmax_cross_entropy,
          sparse_softmax_cross_entropy, sigmoid_cross_entropy, mean_squared_error, huber]
