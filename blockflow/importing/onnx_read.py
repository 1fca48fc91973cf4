"""Reading an ONNX file as plain data, held to the limits of a project file, executing nothing.

The file is parsed by the onnx package's protobuf reader; every tensor is checked (its sizes
against the project file's limits, its payload against its sizes, its dtype against those a
project holds) before numpy sees it, and the model's tensors together must fit in the run memory
budget. A tensor kept in an external file is refused: a model that names files could read any
file on the machine. Shapes come from ONNX's own shape inference, run on the parsed model in
strict mode, in a child process held to limits of memory and time (onnx_infer.py): where it finds the model breaks an op's definition, its reason is kept with the node
it names (``OnnxModel.invalid``), and the import refuses the model there.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from blockflow.budget import format_size, memory_budget
from blockflow.importing.errors import ImportFailure
from blockflow.importing.onnx_infer import infer_shapes
from blockflow.io import rules
from blockflow.optional import need
from blockflow.textsafe import describe_character

__all__ = ["OnnxModel", "OnnxNode", "ValueInfo", "read_onnx", "read_onnx_bytes", "OLDEST_OPSET",
           "DTYPES", "cut_name", "MAX_NAME"]

#: the oldest ai.onnx opset read (the onnx package's own test models are opset 9)
OLDEST_OPSET = 9

#: ONNX's data type numbers (TensorProto.DataType, fixed by the spec) -> the numpy dtypes a
#: project can hold; any other (strings, bfloat16, complex, unsigned > 8 bits) is refused by name
DTYPES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
          10: "float16", 11: "float64"}
_TYPE_NAMES = {0: "undefined", 4: "uint16", 8: "string", 12: "uint32", 13: "uint64", 14: "complex64",
               15: "complex128", 16: "bfloat16"}

#: longest name kept from the file (a node's, a value's); the rest is cut, said with "..."
MAX_NAME = 200
#: the most dimensions a value may be declared with (numpy's most)
MOST_AXES = 64


@dataclass(frozen=True)
class ValueInfo:
    """A value's dtype (None: unknown) and shape (None: unknown rank; each size an int, a
    symbolic name, or None)."""

    name: str
    dtype: np.dtype | None = None
    shape: tuple | None = None
    #: the ONNX type's name when a project cannot hold it ("string", "uint16"), else ""
    refused_type: str = ""

    @property
    def static_shape(self) -> tuple | None:
        """The shape when every size is a known number, else None."""
        if self.shape is None or any(not isinstance(d, int) for d in self.shape):
            return None
        return self.shape


@dataclass
class OnnxNode:
    """One node of the graph, its attributes as plain Python values (tensors as ndarrays)."""

    index: int
    op: str
    domain: str
    name: str
    inputs: tuple
    outputs: tuple
    attrs: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """How messages name the node: its name, else its first output's, else its index."""
        if self.name:
            return self.name
        first = next((o for o in self.outputs if o), "")
        return first or f"#{self.index}"


@dataclass
class OnnxModel:
    """What the import reads from a file."""

    source: str
    opset: int
    producer: str
    graph_name: str
    doc: str
    inputs: list            # ValueInfo of the graph inputs that are not initializers
    outputs: list           # ValueInfo of the graph outputs
    initializers: dict      # name -> ndarray
    nodes: list             # OnnxNode, in the file's order
    types: dict             # value name -> ValueInfo (inputs, outputs and shape inference's)
    #: (index of the node, or None for the graph, ONNX's reason) when ONNX's strict shape
    #: inference finds the model invalid; None when it does not (or cannot run)
    invalid: tuple | None = None


def read_onnx(path) -> OnnxModel:
    """The model in the ONNX file ``path``; ImportFailure naming the file and the problem."""
    path = Path(path)
    source = str(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise ImportFailure(f"{source}: cannot read it: {exc.strerror or exc}") from None
    if not path.is_file():
        raise ImportFailure(f"{source}: not a file")
    if st.st_size > rules.MAX_FILE_BYTES:
        raise ImportFailure(f"{source}: the file has {format_size(st.st_size)}; the limit is "
                            f"{format_size(rules.MAX_FILE_BYTES)} (the limit of a project file)")
    try:
        with open(path, "rb") as f:
            data = f.read(rules.MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ImportFailure(f"{source}: cannot read it: {exc.strerror or exc}") from None
    return read_onnx_bytes(data, source)


def read_onnx_bytes(data: bytes, source: str = "the model") -> OnnxModel:
    """The model serialized in ``data`` (``source`` names it in messages)."""
    onnx = need("onnx")
    if len(data) > rules.MAX_FILE_BYTES:
        raise ImportFailure(f"{source}: the model has {format_size(len(data))}; the limit is "
                            f"{format_size(rules.MAX_FILE_BYTES)} (the limit of a project file)")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError, or a RuntimeError from its C++ reader
        raise ImportFailure(f"{source}: not an ONNX model (it does not parse: {exc})") from None
    if not model.HasField("graph"):
        raise ImportFailure(f"{source}: not an ONNX model (it has no graph)")
    return _Reader(onnx, model, source).read()


def cut_name(text: str, limit: int = MAX_NAME) -> str:
    """``text`` from the file as messages show it: unprintable characters as ``?``, at most
    ``limit`` characters kept (MAX_NAME: a node's or a value's name), the rest said with "..."."""
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= limit else text[:limit] + "..."


#: where ONNX's shape inference names the node it failed on (the copy it is given names each
#: node by its index, so an unnamed node or a name used twice is found too)
_FAILED_NODE = re.compile(r"\(op_type:[^,()]*, node name: #(\d+)\): (?:\[\w+\] )?([^\n]*)"
                          r"|node name #(\d+)\. ([^\n]*)")
#: longest reason quoted from ONNX
MAX_REASON = 600

class _Schema(NamedTuple):
    """What the import checks of an op's schema before onnx's shape inference runs."""

    fewest: int          # inputs
    most: int
    required: tuple      # (position, name) of each input that must be given
    checked: bool        # whether it takes an attribute checked here ('axis', 'axes', 'num_outputs')
    graphs: bool         # whether it holds graphs (If, Loop, Scan)


def _where(node) -> str:
    """How a message names a NodeProto: its name, else its first output's, else its op."""
    label = node.name or next((o for o in node.output if o), node.op_type)
    return f"node '{cut_name(label)}' ({cut_name(node.op_type)})"


#: an Einsum term onnx's shape inference reads (letters, spaces, at most one '...')
_EINSUM_TERM = re.compile(r"[A-Za-z ]*(?:\.\.\.)?[A-Za-z ]*")


def _inference_verdict(message: str) -> tuple | None:
    """(node index or None, reason) from strict shape inference's error ``message``; None for an
    error inside a function body onnx expands (MeanVarianceNormalization's body fails strict
    inference in onnx 1.23 though ONNX's own test model of it is valid): the node's mapping
    checks it as before."""
    found = _FAILED_NODE.search(message)
    if found is None:
        return None, cut_name(re.sub(r"^(?:\[\w+\] )+", "", message.strip().split("\n")[0]), MAX_REASON)
    index, reason = (found.group(1), found.group(2)) if found.group(1) else (found.group(3), found.group(4))
    if "(op_type:" in reason:
        return None
    return int(index), cut_name(reason.strip(), MAX_REASON)


class _Reader:
    def __init__(self, onnx, model, source: str):
        self.onnx, self.model, self.graph, self.source = onnx, model, model.graph, source
        self.bytes_held = 0
        self.budget, self.budget_from = memory_budget()
        self.opset = OLDEST_OPSET
        self.schemas: dict = {}     # op -> what _schema says of it

    def fail(self, where: str, problem: str):
        raise ImportFailure(f"{self.source}: {where}: {problem}" if where else f"{self.source}: {problem}")

    def read(self) -> OnnxModel:
        opset = self.opset = self._opset()
        g = self.graph
        if len(g.node) > rules.MAX_NODES_PER_PAGE:
            self.fail("", f"the graph has {len(g.node):,} nodes; the limit is {rules.MAX_NODES_PER_PAGE:,} "
                          f"(the limit of a project's page)")
        self._walk_graphs()
        if len(g.sparse_initializer):
            self.fail(f"sparse initializer '{cut_name(g.sparse_initializer[0].values.name)}'",
                      "sparse tensors are not read; store it as a dense initializer")
        inits = {}
        for t in g.initializer:
            if t.name in inits:
                self.fail(f"initializer '{cut_name(t.name)}'", "the graph has two initializers of that name (ONNX "
                                                               "gives every value one definition)")
            inits[t.name] = self.tensor(t, f"initializer '{cut_name(t.name)}'")
        self._check_inputs(inits)
        nodes = [self._node(i, n) for i, n in enumerate(g.node)]
        inputs = [self._value_info(v) for v in g.input if v.name not in inits]
        self._check_input_sizes(inputs)
        self._check_declared_ranks()
        outputs = [self._value_info(v) for v in g.output]
        if not outputs:
            self.fail("", "the graph has no outputs: it computes nothing a project could show")
        types, invalid = self._inferred_types()
        types.update({v.name: v for v in inputs})
        for v in outputs:   # inference's type of an output holds the declared one, and what it found
            if v.dtype is not None and (v.name not in types or types[v.name].dtype is None):
                types[v.name] = v
        for name, arr in inits.items():
            types[name] = ValueInfo(name, arr.dtype, arr.shape)
        return OnnxModel(self.source, opset, cut_name(self.model.producer_name), cut_name(g.name),
                         cut_name(g.doc_string or self.model.doc_string), inputs, outputs, inits, nodes, types,
                         invalid)

    def _walk_graphs(self) -> None:
        """Refuse, before onnx's shape inference sees them, what it cannot get through: nodes past
        a page's limit in the graph and its subgraphs (If, Loop, Scan bodies) together, which the
        import never reads but inference walks (a 25 MB body of a million nodes took 10 s and
        1.7 GB; a 2 GB file, hours), and an Einsum equation it never finishes reading (below).
        Each node visited is counted first, so the walk stops within the limit."""
        limit, total = rules.MAX_NODES_PER_PAGE, len(self.graph.node)
        graphs = [self.graph]
        while graphs:
            for node in graphs.pop().node:
                schema = self._schema(node.op_type) if node.domain in ("", "ai.onnx") else None
                if schema is None:   # not an op onnx knows: inference reads nothing of it
                    continue
                self._check_crashers(node, schema)
                if node.op_type == "Einsum":
                    self._check_einsum(node)
                # (reading a node's attributes is slow: only the ops that hold graphs are read)
                for a in node.attribute if schema.graphs else ():
                    for sub in ([a.g] if a.type == 5 else a.graphs if a.type == 10 else ()):  # GRAPH, GRAPHS
                        total += len(sub.node)
                        if total > limit:
                            self.fail(_where(node), f"the graph and its subgraphs (If, Loop and Scan bodies) have "
                                                    f"more than {limit:,} nodes, the limit of a project's page")
                        graphs.append(sub)

    def _check_crashers(self, node, schema: "_Schema") -> None:
        """Refuse what onnx's checker refuses and its shape inference (1.2x) crashes on, taking
        the process with it (the editor, unsaved work and all): a required input left out
        (EyeLike with no input and a dtype: a segfault), an axis past 32 bits (LayerNormalization
        at axis 2^31 with its Mean output: a segfault; no value has that many axes), a Split's
        num_outputs that is not its outputs' count (inference made 2^31 pieces for one: 34 GB)."""
        given = node.input
        if not schema.fewest <= len(given) <= schema.most:
            low, high = schema.fewest, schema.most
            takes = str(low) if low == high else f"at least {low}" if high >= 2 ** 31 - 1 else f"{low} to {high}"
            self.fail(_where(node), f"the model is not valid ONNX: it has {len(given)} inputs; "
                                    f"{cut_name(node.op_type)} takes {takes}")
        for i, name in schema.required:
            if i < len(given) and not given[i]:
                self.fail(_where(node), f"the model is not valid ONNX: its input {i} ({name}) is required, "
                                        f"and the node leaves it out")
        for a in node.attribute if schema.checked else ():
            if a.name in ("axis", "axes") and any(not -2 ** 31 <= v < 2 ** 31 for v in (a.i, *a.ints)):
                self.fail(_where(node), f"the model is not valid ONNX: its attribute '{a.name}' is "
                                        f"{a.i if a.type == 2 else list(a.ints)}, past any value's axes")
            if a.name == "num_outputs" and a.i != len(node.output):
                self.fail(_where(node), f"the model is not valid ONNX: its attribute 'num_outputs' is {a.i:,}, and "
                                        f"it has {len(node.output)} outputs")

    def _schema(self, op: str) -> "_Schema | None":
        """What _walk_graphs needs of onnx's schema of the ai.onnx op ``op`` at the model's opset
        (None: not an op it knows), kept per op: asking onnx for a schema's parts is slow."""
        if op not in self.schemas:
            defs = self.onnx.defs
            try:
                schema = defs.get_schema(op, self.opset, "")
            except defs.SchemaError:
                self.schemas[op] = None
            else:
                single, kinds = defs.OpSchema.FormalParameterOption.Single, defs.OpSchema.AttrType
                attrs = schema.attributes
                self.schemas[op] = _Schema(
                    schema.min_input, schema.max_input,
                    tuple((i, p.name) for i, p in enumerate(schema.inputs) if p.option == single),
                    bool({"axis", "axes", "num_outputs"} & set(attrs)),
                    any(a.type in (kinds.GRAPH, kinds.GRAPHS) for a in attrs.values()))
        return self.schemas[op]

    def _check_einsum(self, node) -> None:
        """onnx's shape inference (1.2x) loops forever on an Einsum whose terms hold anything but
        letters, spaces and one '...' ('ij#->ij', 'i..j->ij', a NUL or a tab in a term): a
        100-byte file hung the import, and the editor with it."""
        equation = next((a.s.decode("utf-8", "replace") for a in node.attribute if a.name == "equation"), "")
        for term in (t for side in equation.split("->") for t in side.split(",")):
            if not _EINSUM_TERM.fullmatch(term):
                # a term failing the pattern keeps a character that is neither once one '...' is out
                odd = next(c for c in term.replace("...", "", 1) if not (c.isascii() and c.isalpha()) and c != " ")
                what = f"'{odd}'" if odd.isprintable() else describe_character(odd)
                self.fail(_where(node), f"the model is not valid ONNX: its equation '{cut_name(equation)}' has {what} "
                                 f"in the term '{cut_name(term)}' (a term holds letters, spaces and one '...')")

    def _check_input_sizes(self, inputs: list) -> None:
        """Refuse a graph input no project can hold before onnx's shape inference sees it: its
        time and memory follow the sizes a file declares (a Slice's ends declared [2^40]: hours,
        though inference is now held to limits: onnx_infer.py). The import refused such an input
        only after inference."""
        for v in inputs:
            sizes = [d for d in v.shape or () if isinstance(d, int)]
            where = f"graph input '{cut_name(v.name)}'"
            if len(v.shape or ()) > rules.MAX_NDIM:
                self.fail("", f"{where} has {len(v.shape)} dimensions; the limit is {rules.MAX_NDIM}")
            if any(d < 0 for d in sizes):
                self.fail("", f"{where} has a negative size in its shape {list(v.shape)}")
            if math.prod(sizes) > rules.MAX_ARRAY_ELEMENTS:
                self.fail("", f"{where} has {math.prod(sizes):,} elements; the limit for one array is "
                              f"{rules.MAX_ARRAY_ELEMENTS:,}")

    def _check_declared_ranks(self) -> None:
        """Refuse a graph output or a value_info declared with more dimensions than any array has
        before onnx's shape inference copies that shape along the ops after it (a million declared
        dimensions, a 2 MB file, took it past 250 MB in a few ops; graph inputs are held to
        MAX_NDIM by _check_input_sizes)."""
        for kind, values in (("graph output", self.graph.output), ("value", self.graph.value_info)):
            for v in values:
                rank = len(v.type.tensor_type.shape.dim) if v.type.HasField("tensor_type") else 0
                if rank > MOST_AXES:
                    self.fail("", f"{kind} '{cut_name(v.name)}' is declared with {rank:,} dimensions; no array has "
                                  f"more than {MOST_AXES}")

    def _check_inputs(self, inits: dict) -> None:
        """Refuse a graph input named twice (ONNX gives every value one definition; onnx's checker
        and onnxruntime refuse the model), and an initializer of a graph input's name whose dtype
        or shape is not the input's: it is the input's default value (IR.md), so of its type
        (onnx's full check and onnxruntime refuse it). The import used the first input, or the
        initializer, without a word."""
        seen = set()
        for v in self.graph.input:
            name = v.name
            if name in seen:
                self.fail(f"graph input '{cut_name(name)}'", "the graph has two inputs of that name (ONNX gives "
                                                             "every value one definition)")
            seen.add(name)
            arr = inits.get(name)
            if arr is None or not v.type.HasField("tensor_type"):
                continue
            tt = v.type.tensor_type   # read as it is (every input of some exporters' models has one)
            if tt.elem_type and DTYPES.get(tt.elem_type) != arr.dtype.name:
                dtype = DTYPES.get(tt.elem_type) or _TYPE_NAMES.get(tt.elem_type, f"number {tt.elem_type}")
                self.fail(f"graph input '{cut_name(name)}'", f"it is {dtype}, but the initializer of that name "
                                                             f"(its default value) is {arr.dtype.name}")
            dims = tt.shape.dim if tt.HasField("shape") else None
            if dims is not None and (len(dims) != arr.ndim or any(
                    d.HasField("dim_value") and d.dim_value != n for d, n in zip(dims, arr.shape))):
                self.fail(f"graph input '{cut_name(name)}'", f"its shape is {list(self._value_info(v).shape)}, but "
                                                             f"the initializer of that name (its default value) is "
                                                             f"{list(arr.shape)}")

    def _opset(self) -> int:
        found = {imp.domain: imp.version for imp in self.model.opset_import}
        version = found.get("", found.get("ai.onnx"))
        if version is None:
            self.fail("", "the model imports no ai.onnx opset (a model of another domain only)")
        if version < OLDEST_OPSET:
            self.fail("", f"opset {version} is older than {OLDEST_OPSET}, the oldest the import reads; "
                          f"convert it first (onnx.version_converter.convert_version(model, {OLDEST_OPSET}))")
        newest = self.onnx.defs.onnx_opset_version()
        if version > newest:
            # an op may mean something else in an opset this onnx package does not know, and
            # the mappings were checked against the versions it defines
            self.fail("", f"opset {version} is newer than {newest}, the newest the installed onnx package "
                          f"knows; update it (pip install -U onnx) or convert the model to opset {newest}")
        return int(version)

    # ------------------------------------------------------------------------- tensors

    def tensor(self, t, where: str) -> np.ndarray:
        """A TensorProto as an ndarray, checked before anything is allocated."""
        if t.data_location == 1:   # TensorProto.EXTERNAL
            self.fail(where, "its data is kept in an external file, which the import does not read "
                             "(a model that names files could read any file); save the model with its "
                             "data inside it (onnx.save_model(model, path, save_as_external_data=False))")
        dtype = DTYPES.get(t.data_type)
        if dtype is None:
            self.fail(where, f"dtype {_TYPE_NAMES.get(t.data_type, t.data_type)} is not one a project "
                             f"holds ({', '.join(sorted(set(DTYPES.values())))})")
        dims = list(t.dims)
        if len(dims) > rules.MAX_NDIM:
            self.fail(where, f"{len(dims)} dimensions; the limit is {rules.MAX_NDIM}")
        if any(d < 0 for d in dims):
            self.fail(where, f"a negative size in its shape {dims}")
        size = math.prod(dims)
        if size > rules.MAX_ARRAY_ELEMENTS:
            self.fail(where, f"{size:,} elements; the limit for one array is {rules.MAX_ARRAY_ELEMENTS:,}")
        self.hold(size * np.dtype(dtype).itemsize, where)
        if t.HasField("raw_data") and len(t.raw_data) != size * np.dtype(dtype).itemsize:
            self.fail(where, f"its data has {len(t.raw_data):,} bytes, its shape {dims} and dtype {dtype} "
                             f"need {size * np.dtype(dtype).itemsize:,}")
        try:
            arr = self.onnx.numpy_helper.to_array(t)
        except Exception as exc:  # a payload that does not match its shape
            self.fail(where, f"its data does not fit its shape {dims} ({exc})")
        if arr.shape != tuple(dims) or arr.dtype.name != dtype:
            self.fail(where, f"its data does not fit its shape {dims} and dtype {dtype}")
        return arr if arr.flags.c_contiguous else arr.copy(order="C")  # (ascontiguousarray makes a 0-d array 1-d)

    def hold(self, nbytes: int, where: str) -> None:
        """Count ``nbytes`` more of tensors against the run memory budget."""
        self.bytes_held += nbytes
        if self.bytes_held > self.budget:
            self.fail(where, f"the model's tensors reach {format_size(self.bytes_held)}, more than the memory "
                             f"budget of {format_size(self.budget)} ({self.budget_from}; docs/limits.md)")

    # ------------------------------------------------------------------------- graph

    def _node(self, index: int, n) -> OnnxNode:
        node = OnnxNode(index, n.op_type, n.domain if n.domain != "ai.onnx" else "", cut_name(n.name),
                        tuple(n.input), tuple(n.output))
        for a in n.attribute:
            node.attrs[a.name] = self._attr(a, f"node '{node.label}' attribute '{cut_name(a.name)}'")
        return node

    def _attr(self, a, where: str):
        kind = a.type
        if kind == 1:
            return float(a.f)
        if kind == 2:
            return int(a.i)
        if kind == 3:
            return a.s.decode("utf-8", "replace")
        if kind == 4:
            return self.tensor(a.t, where)
        if kind in (6, 7, 8):
            values = a.floats if kind == 6 else a.ints if kind == 7 else a.strings
            # a Python tuple costs some 36 bytes an entry (a pointer and a number object)
            if len(values) > rules.MAX_ARRAY_ELEMENTS:
                self.fail(where, f"{len(values):,} values; the limit for one array is {rules.MAX_ARRAY_ELEMENTS:,}")
            self.hold(36 * len(values), where)
            if kind == 6:
                return tuple(float(v) for v in values)
            if kind == 7:
                return tuple(int(v) for v in values)
            return tuple(s.decode("utf-8", "replace") for s in values)
        if kind == 9:
            return tuple(self.tensor(t, where) for t in a.tensors)
        # graphs (If, Loop, Scan bodies), sparse tensors, type protos: no op the import maps takes
        # one, so the node is refused by the mapping, naming it; nothing inside is read
        return _Opaque(kind)

    def _value_info(self, v) -> ValueInfo:
        tt = v.type.tensor_type if v.type.HasField("tensor_type") else None
        if tt is None:
            return ValueInfo(v.name)
        dtype = DTYPES.get(tt.elem_type)
        shape = None
        if tt.HasField("shape"):
            shape = tuple(int(d.dim_value) if d.HasField("dim_value") else
                          (cut_name(d.dim_param) if d.dim_param else None) for d in tt.shape.dim)
        refused = "" if dtype or not tt.elem_type else _TYPE_NAMES.get(tt.elem_type, f"number {tt.elem_type}")
        return ValueInfo(v.name, np.dtype(dtype) if dtype else None, shape, refused)

    def _inferred_types(self) -> tuple:
        """(ONNX's shape inference of every value it can type, its verdict): strict, so a node
        that breaks its op's definition (a stride of 0, a Gemm of sizes that do not match) is
        named with ONNX's reason (OnnxModel.invalid); the types are then those of a lenient
        run. {} when it cannot run (the mapping then says which value's shape it needed). It runs
        in a child process held to limits of memory and time (onnx_infer.py)."""
        found = infer_shapes(self.onnx, self._without_weights(), self.source)
        verdict = None if found.strict_error is None else _inference_verdict(found.strict_error)
        if found.model is None:
            return {}, verdict
        g = found.model.graph
        return {v.name: self._value_info(v) for v in (*g.value_info, *g.output)}, verdict

    #: initializers larger than this go to shape inference as typed inputs, without their data
    INFER_WITH_DATA = 4096

    def _without_weights(self):
        """The model with its large initializers as typed graph inputs: what shape inference
        needs of a weight is its type, and serializing ResNet-50's 100 MB for it took 0.4 s
        holding the GIL (the editor imports on a thread: its window froze that long). Small
        initializers (shapes, axes) keep their values, which data propagation reads."""
        onnx, model = self.onnx, self.model
        light = onnx.ModelProto()
        for name in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
            setattr(light, name, getattr(model, name))
        light.opset_import.extend(model.opset_import)
        g, lg = model.graph, light.graph
        lg.name = g.name
        lg.node.extend(g.node)
        for i, n in enumerate(lg.node):   # how inference's messages name a node (_FAILED_NODE)
            n.name = f"#{i}"
        lg.input.extend(g.input)
        lg.output.extend(g.output)
        lg.value_info.extend(g.value_info)
        declared = {v.name for v in g.input}
        for t in g.initializer:
            if math.prod(t.dims) <= self.INFER_WITH_DATA:
                lg.initializer.append(t)
            elif t.name not in declared:
                lg.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        return light


@dataclass(frozen=True)
class _Opaque:
    """An attribute the import does not read (a subgraph, a sparse tensor): its kind number."""

    kind: int

