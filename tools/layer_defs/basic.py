"""The basic layers of the library (issue 14): Dense, Conv2D, Conv2DTranspose, the poolings,
Flatten, Dropout, the normalizations and Embedding, as Keras names and parameterizes them.

Each builder returns the layer's Composite; tools/make_layers.py writes it. Bump a layer's
version (in its ``@layer`` mark) whenever its definition changes.
"""
from __future__ import annotations

from blockflow.spec import Attr
from blockflow_blocks.nn_activations import ACTIVATIONS

from .kit import INITIALIZERS, dim, layer, new_layer, param

_IMAGE = ["batch", "height", "width", "channels"]
_IMAGE_DOC = "images, NHWC: [batch, height, width, channels]"


def _activation_param(default="linear"):
    return Attr("activation", "choice", default, choices=ACTIVATIONS,
                doc="applied to the result (linear: none)")


def _bias_params():
    return [Attr("use_bias", "bool", True, doc="add a trained bias (false: the bias is a frozen zero)"),
            Attr("kernel_initializer", "choice", "glorot_uniform", choices=INITIALIZERS,
                 doc="the kernel's first value"),
            Attr("bias_initializer", "choice", "zeros", choices=INITIALIZERS, doc="the bias's first value")]


def _bias_and_activation(d, src: str, size_param: str, col: int) -> str:
    """src + bias (when use_bias), then the chosen activation, from grid column ``col`` on (the
    output goes at col + 4); returns the activation's output."""
    d.add("Variable", "bias", (col, 2), {"shape": [param(size_param)], "initializer": param("bias_initializer"),
                                         "seed": 2, "trainable": param("use_bias")})
    d.add("Const", "use_bias", (col, 3), {"value": param("use_bias"), "dtype": "float32"},
          label="1 with use_bias, else 0")
    d.add("Multiply", "bias_used", (col + 1, 2))
    d.wire("bias.ref", "bias_used.x")
    d.wire("use_bias.output", "bias_used.y")
    d.add("BiasAdd", "BiasAdd", (col + 2, 0))
    d.wire(src, "BiasAdd.value")
    d.wire("bias_used.z", "BiasAdd.bias")
    d.add("Activation", "activation", (col + 3, 0), {"kind": param("activation")})
    d.wire("BiasAdd.output", "activation.x")
    return "activation.y"


@layer("core", 1)
def dense():
    d = new_layer(dense, "Dense", (
        "A fully connected layer: y = activation(x @ kernel + bias), as Keras's Dense.\n\n"
        "kernel is [features, units], drawn by kernel_initializer; bias is [units]. Training and "
        "inference behave alike."), [
        Attr("units", "int", 32, min=1, doc="output features"), _activation_param(), *_bias_params()])
    d.input("x", ["batch", "features"], doc="[batch, features]")
    d.add("Variable", "kernel", (0, 1), {"shape": [dim("features"), param("units")],
                                         "initializer": param("kernel_initializer"), "seed": 1})
    d.add("MatMul", "MatMul", (1, 0))
    d.wire("x.output", "MatMul.a")
    d.wire("kernel.ref", "MatMul.b")
    d.output(_bias_and_activation(d, "MatMul.product", "units", 1), (5, 0), doc="[batch, units]",
             shape=["batch", param("units")])
    return d.comp


def _conv_params(transposed: bool):
    padding = (Attr("padding", "choice", "SAME", choices=("SAME",),
                    doc="SAME: the output is strides times the input") if transposed else
               Attr("padding", "choice", "VALID", choices=("VALID", "SAME"),
                    doc="VALID: no padding; SAME: pad so that the output is input / strides"))
    return [Attr("filters", "int", 32, min=1, doc="output channels"),
            Attr("kernel_size", "int", 3, min=1, doc="the square kernel's height and width"),
            Attr("strides", "int", 1, min=1, doc="step of the kernel in height and width"),
            padding, _activation_param(), *_bias_params()]


@layer("convolution", 1)
def conv2d():
    d = new_layer(conv2d, "Conv2D", (
        "A 2-D convolution layer on NHWC images: y = activation(conv2d(x, kernel) + bias), as "
        "Keras's Conv2D (square kernel and strides).\n\n"
        "kernel is [kernel_size, kernel_size, channels, filters]; the output is [batch, "
        "out_height, out_width, filters]. Training and inference behave alike."), _conv_params(False))
    d.input("x", _IMAGE, doc=_IMAGE_DOC)
    k, s = param("kernel_size"), param("strides")
    d.add("Variable", "kernel", (0, 1), {"shape": [k, k, dim("channels"), param("filters")],
                                         "initializer": param("kernel_initializer"), "seed": 1})
    d.add("Conv2D", "Conv2D", (1, 0), {"strides": [1, s, s, 1], "padding": param("padding")})
    d.wire("x.output", "Conv2D.input")
    d.wire("kernel.ref", "Conv2D.filter")
    d.output(_bias_and_activation(d, "Conv2D.output", "filters", 1), (5, 0), doc="[batch, out_height, out_width, filters]",
             shape=["batch", -1, -1, param("filters")])
    return d.comp


@layer("convolution", 1)
def conv2d_transpose():
    d = new_layer(conv2d_transpose, "Conv2DTranspose", (
        "A transposed 2-D convolution (upsampling) on NHWC images, as Keras's Conv2DTranspose "
        "with padding 'same': y = activation(conv2d_transpose(x, kernel) + bias), of shape "
        "[batch, height·strides, width·strides, filters].\n\n"
        "kernel is [kernel_size, kernel_size, filters, channels] (TensorFlow's layout for a "
        "transposed convolution). The output size is computed from x's shape while compiling, so "
        "the batch size must be known. Training and inference behave alike."), _conv_params(True))
    d.input("x", _IMAGE, doc=_IMAGE_DOC)
    k, s = param("kernel_size"), param("strides")
    d.add("Variable", "kernel", (3, 2), {"shape": [k, k, param("filters"), dim("channels")],
                                         "initializer": param("kernel_initializer"), "seed": 1})
    d.add("Shape", "Shape", (1, 1))
    d.wire("x.output", "Shape.input")
    d.add("Const", "scale", (1, 2), {"value": [1, s, s, 0], "dtype": "int32"})
    d.add("Multiply", "scaled", (2, 1))
    d.wire("Shape.output", "scaled.x")
    d.wire("scale.output", "scaled.y")
    d.add("Const", "channels", (2, 2), {"value": [0, 0, 0, param("filters")], "dtype": "int32"})
    d.add("Add", "output_size", (3, 1), label="[batch, height·s, width·s, filters]")
    d.wire("scaled.z", "output_size.x")
    d.wire("channels.output", "output_size.y")
    d.add("Conv2DBackpropInput", "Conv2DTranspose", (4, 0), {"strides": [1, s, s, 1], "padding": "SAME"})
    d.wire("output_size.z", "Conv2DTranspose.input_sizes")
    d.wire("kernel.ref", "Conv2DTranspose.filter")
    d.wire("x.output", "Conv2DTranspose.out_backprop")
    d.output(_bias_and_activation(d, "Conv2DTranspose.output", "filters", 5), (9, 0),
             doc="[batch, height·strides, width·strides, filters]", shape=["batch", -1, -1, param("filters")])
    return d.comp


def _pooling(fn, name: str, block: str, port: str, what: str):
    d = new_layer(fn, name, (
        f"{what} over pool_size × pool_size windows of NHWC images, per channel, as Keras's {name}.\n\n"
        "The output is [batch, out_height, out_width, channels]. No Variables; training and "
        "inference behave alike."), [
        Attr("pool_size", "int", 2, min=1, doc="the window's height and width"),
        Attr("strides", "int", 2, min=1, doc="step of the window (Keras's default: pool_size)"),
        Attr("padding", "choice", "VALID", choices=("VALID", "SAME"), doc="VALID: whole windows only")])
    d.input("x", _IMAGE, doc=_IMAGE_DOC)
    p, s = param("pool_size"), param("strides")
    d.add(block, block, (1, 0), {"ksize": [1, p, p, 1], "strides": [1, s, s, 1], "padding": param("padding")})
    d.wire("x.output", f"{block}.{port}")
    d.output(f"{block}.output", (2, 0), doc="[batch, out_height, out_width, channels]",
             shape=["batch", -1, -1, "channels"])
    return d.comp


@layer("pooling", 1)
def max_pooling2d():
    return _pooling(max_pooling2d, "MaxPooling2D", "MaxPool", "input", "The maximum")


@layer("pooling", 1)
def average_pooling2d():
    return _pooling(average_pooling2d, "AveragePooling2D", "AvgPool", "value", "The mean")


@layer("pooling", 1)
def global_average_pooling2d():
    d = new_layer(global_average_pooling2d, "GlobalAveragePooling2D", (
        "The mean of each channel over the height and width of NHWC images, as Keras's "
        "GlobalAveragePooling2D: [batch, height, width, channels] -> [batch, channels].\n\n"
        "No Variables; training and inference behave alike."), [])
    d.input("x", _IMAGE, doc=_IMAGE_DOC)
    d.add("Mean", "Mean", (1, 0), inputs={"axis": [1, 2]})
    d.wire("x.output", "Mean.input")
    d.output("Mean.output", (2, 0), doc="[batch, channels]", shape=["batch", "channels"])
    return d.comp


@layer("reshaping", 1)
def flatten():
    d = new_layer(flatten, "Flatten", (
        "Flattens NHWC images into rows, as Keras's Flatten: [batch, height, width, channels] -> "
        "[batch, height·width·channels], row-major (channels fastest).\n\n"
        "The batch size may be open; height, width and channels must be known. No Variables."), [])
    d.input("x", _IMAGE, doc=_IMAGE_DOC)
    d.add("Const", "height", (0, 1), {"value": [dim("height")], "dtype": "int32"})
    d.add("Const", "width", (0, 2), {"value": [dim("width")], "dtype": "int32"})
    d.add("Multiply", "hw", (1, 1))
    d.wire("height.output", "hw.x")
    d.wire("width.output", "hw.y")
    d.add("Const", "channels", (1, 2), {"value": [dim("channels")], "dtype": "int32"})
    d.add("Multiply", "features", (2, 1))
    d.wire("hw.z", "features.x")
    d.wire("channels.output", "features.y")
    d.add("Const", "any_batch", (2, 2), {"value": [-1], "dtype": "int32"})
    d.add("Concat", "shape", (3, 1), {}, inputs={"axis": 0}, label="[-1, height·width·channels]")
    d.wire("any_batch.output", "shape.values[0]")
    d.wire("features.z", "shape.values[1]")
    d.add("Reshape", "Reshape", (4, 0))
    d.wire("x.output", "Reshape.tensor")
    d.wire("shape.output", "Reshape.shape")
    d.output("Reshape.output", (5, 0), doc="[batch, height·width·channels]", shape=["batch", -1])
    return d.comp


@layer("regularization", 1)
def dropout():
    d = new_layer(dropout, "Dropout", (
        "Dropout, as Keras's Dropout: in training, each entry of x is zeroed with probability rate "
        "and the others are scaled by 1 / (1 - rate); in inference, y = x.\n\n"
        "Training or inference is the run's learning phase (the LearningPhase block: true when the "
        "run reads the train split: training steps, a Run in the editor, blockflow run; false in a "
        "training's test evaluations). Masks are seeded: the same seed, step and run seed give the "
        "same mask."), [
        Attr("rate", "float", 0.5, min=0.0, max=0.999, doc="probability of dropping an entry, in [0, 1)"),
        Attr("seed", "int", 0, min=0, doc="seed of the masks (mixed with the instance's path)")])
    d.input("x", None, dtype="any", doc="any shape, float")
    d.add("Dropout", "Dropout", (1, 0), {"rate": param("rate"), "seed": param("seed"), "training": True})
    d.wire("x.output", "Dropout.x")
    d.add("LearningPhase", "phase", (1, 1))
    d.add("Select", "Select", (2, 0))
    d.wire("phase.training", "Select.condition")
    d.wire("Dropout.output", "Select.t")
    d.wire("x.output", "Select.e")
    d.output("Select.output", (3, 0), doc="x's shape", dtype="any")
    return d.comp


def _normalization_params():
    return [Attr("momentum", "float", 0.99, min=0.0, max=1.0,
                 doc="weight of the old moving statistics in each training update"),
            Attr("epsilon", "float", 0.001, min=0.0, doc="added to the variance"),
            Attr("center", "bool", True, doc="add a trained offset beta (false: beta is a frozen 0)"),
            Attr("scale", "bool", True, doc="multiply by a trained gamma (false: gamma is a frozen 1)")]


def _moving_update(d, stat: str, batch_port: str, row: int) -> None:
    """moving_STAT <- batch + momentum · (moving - batch) in training; unchanged in inference."""
    d.add("Subtract", f"{stat}_drift", (3, row))
    d.wire(f"moving_{stat}.ref", f"{stat}_drift.x")
    d.wire(batch_port, f"{stat}_drift.y")
    d.add("Multiply", f"{stat}_kept", (4, row))
    d.wire(f"{stat}_drift.z", f"{stat}_kept.x")
    d.wire("momentum.output", f"{stat}_kept.y")
    d.add("Add", f"{stat}_updated", (5, row))
    d.wire(batch_port, f"{stat}_updated.x")
    d.wire(f"{stat}_kept.z", f"{stat}_updated.y")
    d.add("Select", f"{stat}_new", (6, row))
    d.wire("phase.training", f"{stat}_new.condition")
    d.wire(f"{stat}_updated.z", f"{stat}_new.t")
    d.wire(f"moving_{stat}.ref", f"{stat}_new.e")
    d.add("Assign", f"update_{stat}", (7, row))
    d.wire(f"moving_{stat}.ref", f"update_{stat}.ref")
    d.wire(f"{stat}_new.output", f"update_{stat}.value")


def _batch_norm(fn, name: str, images: bool):
    shape = _IMAGE if images else ["batch", "features"]
    channels = "channels" if images else "features"
    d = new_layer(fn, name, (
        f"Batch normalization, as Keras's BatchNormalization, of {'NHWC images' if images else 'rows'} "
        f"({shape[0]} x ... x {channels}), per {channels[:-1]}: y = gamma · (x - m) / sqrt(v + epsilon) + beta.\n\n"
        "In training, m and v are the batch's mean and variance, and each run updates the moving "
        "statistics, kept in the instance's state (Variables moving_mean and moving_variance, not "
        "trained): moving = momentum · moving + (1 - momentum) · batch (the variance Bessel-"
        "corrected, as TensorFlow's fused kernel). In inference m and v are the moving statistics "
        "and nothing is updated. Training or inference is the run's learning phase (the "
        "LearningPhase block: true when the run reads the train split)."), _normalization_params())
    d.input("x", shape, doc="[" + ", ".join(shape) + "]")
    c = dim(channels)
    d.add("Variable", "gamma", (0, 2), {"shape": [c], "initializer": "ones", "trainable": param("scale")})
    d.add("Variable", "beta", (0, 3), {"shape": [c], "initializer": "zeros", "trainable": param("center")})
    d.add("Variable", "moving_mean", (0, 4), {"shape": [c], "initializer": "zeros", "trainable": False})
    d.add("Variable", "moving_variance", (0, 5), {"shape": [c], "initializer": "ones", "trainable": False})
    d.add("LearningPhase", "phase", (2, 5.2))
    src = "x.output"
    if not images:   # FusedBatchNormV3 normalizes 4-D tensors: rows become [n, 1, 1, features]
        d.add("Const", "as_images", (0, 1), {"value": [-1, 1, 1, c], "dtype": "int32"})
        d.add("Reshape", "to_images", (1, 0))
        d.wire("x.output", "to_images.tensor")
        d.wire("as_images.output", "to_images.shape")
        src = "to_images.output"
    for bn, training in (("train_bn", True), ("infer_bn", False)):
        d.add("FusedBatchNormV3", bn, (2, 0 if training else 2.6),
              {"epsilon": param("epsilon"), "is_training": training, "exponential_avg_factor": 1.0})
        d.wire(src, f"{bn}.x")
        d.wire("gamma.ref", f"{bn}.scale")
        d.wire("beta.ref", f"{bn}.offset")
        d.wire("moving_mean.ref", f"{bn}.mean")
        d.wire("moving_variance.ref", f"{bn}.variance")
    d.add("Select", "normalized", (3, 0))
    d.wire("phase.training", "normalized.condition")
    d.wire("train_bn.y", "normalized.t")
    d.wire("infer_bn.y", "normalized.e")
    out = "normalized.output"
    if not images:
        d.add("Const", "as_rows", (4, 1), {"value": [-1, c], "dtype": "int32"})
        d.add("Reshape", "to_rows", (5, 0))
        d.wire(out, "to_rows.tensor")
        d.wire("as_rows.output", "to_rows.shape")
        out = "to_rows.output"
    d.output(out, (6, 0), doc="x's shape", shape=shape)
    d.add("Const", "momentum", (3, 5.4), {"value": param("momentum"), "dtype": "float32"})
    _moving_update(d, "mean", "train_bn.batch_mean", 3)
    _moving_update(d, "variance", "train_bn.batch_variance", 4.2)
    return d.comp


@layer("normalization", 1)
def batch_normalization():
    return _batch_norm(batch_normalization, "BatchNormalization", images=False)


@layer("normalization", 1)
def batch_normalization2d():
    return _batch_norm(batch_normalization2d, "BatchNormalization2D", images=True)


@layer("normalization", 1)
def layer_normalization():
    d = new_layer(layer_normalization, "LayerNormalization", (
        "Layer normalization of each row over its features, as Keras's LayerNormalization: "
        "y = gamma · (x - mean) / sqrt(variance + epsilon) + beta, mean and (biased) variance "
        "taken over the last axis of each row.\n\n"
        "gamma and beta are [features]. Training and inference behave alike."), [
        Attr("epsilon", "float", 0.001, min=0.0, doc="added to the variance"),
        Attr("center", "bool", True, doc="add a trained offset beta (false: beta is a frozen 0)"),
        Attr("scale", "bool", True, doc="multiply by a trained gamma (false: gamma is a frozen 1)")])
    d.input("x", ["batch", "features"], doc="[batch, features]")
    d.add("Mean", "mean", (1, 1), {"keep_dims": True}, inputs={"axis": [-1]})
    d.wire("x.output", "mean.input")
    d.add("Subtract", "centred", (2, 0))
    d.wire("x.output", "centred.x")
    d.wire("mean.output", "centred.y")
    d.add("Square", "squares", (3, 1))
    d.wire("centred.z", "squares.x")
    d.add("Mean", "variance", (4, 1), {"keep_dims": True}, inputs={"axis": [-1]})
    d.wire("squares.y", "variance.input")
    d.add("Const", "epsilon", (4, 2), {"value": param("epsilon"), "dtype": "float32"})
    d.add("Add", "shifted", (5, 1))
    d.wire("variance.output", "shifted.x")
    d.wire("epsilon.output", "shifted.y")
    d.add("Rsqrt", "inv_std", (6, 1))
    d.wire("shifted.z", "inv_std.x")
    d.add("Multiply", "normalized", (7, 0))
    d.wire("centred.z", "normalized.x")
    d.wire("inv_std.y", "normalized.y")
    d.add("Variable", "gamma", (7, 2), {"shape": [dim("features")], "initializer": "ones",
                                        "trainable": param("scale")})
    d.add("Multiply", "scaled", (8, 0))
    d.wire("normalized.z", "scaled.x")
    d.wire("gamma.ref", "scaled.y")
    d.add("Variable", "beta", (8, 2), {"shape": [dim("features")], "initializer": "zeros",
                                       "trainable": param("center")})
    d.add("Add", "offset", (9, 0))
    d.wire("scaled.z", "offset.x")
    d.wire("beta.ref", "offset.y")
    d.output("offset.z", (10, 0), doc="[batch, features]", shape=["batch", "features"])
    return d.comp


@layer("embedding", 1)
def embedding():
    d = new_layer(embedding, "Embedding", (
        "A lookup table of learned vectors, as Keras's Embedding: y[..., :] = embeddings[ids[...], :].\n\n"
        "embeddings is [input_dim, output_dim], drawn uniformly from [-0.05, 0.05) as Keras does; "
        "ids (int32 or int64, any shape) must be in [0, input_dim). The gradient reaches only the "
        "rows looked up. Training and inference behave alike."), [
        Attr("input_dim", "int", 1000, min=1, doc="how many ids (the vocabulary's size)"),
        Attr("output_dim", "int", 16, min=1, doc="the size of each vector")])
    d.input("ids", None, dtype="any", doc="integer ids, any shape")
    d.add("Variable", "embeddings", (0, 1), {"shape": [param("input_dim"), param("output_dim")],
                                             "initializer": "random_uniform", "scale": 0.05, "seed": 1})
    d.add("Gather", "Gather", (1, 0), inputs={"axis": 0})
    d.wire("embeddings.ref", "Gather.params")
    d.wire("ids.output", "Gather.indices")
    d.output("Gather.output", (2, 0), doc="ids' shape + [output_dim]")
    return d.comp


LAYERS = [dense, conv2d, conv2d_transpose, max_pooling2d, average_pooling2d, global_average_pooling2d,
          flatten, dropout, batch_normalization, batch_normalization2d, layer_normalization, embedding]
