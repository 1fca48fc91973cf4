"""One class of an exported PyTorch file: the page's ``Model`` or one composite instance's body.

The body is the level's blocks in an order that respects their wires (ties follow the drawing,
so every instance of a composite gets the same text and they share one class), each block's
lowering (torch_lowering.py), child instances as sub-module calls, and the state a run updates
written when ``forward`` ends. torch_module.py drives it and writes the file around the classes.
"""
from __future__ import annotations

import heapq
import re

import numpy as np

from blockflow.compile.program import Step
from blockflow.export.errors import ExportError
from blockflow.export.lowering import call_fields
from blockflow.export.names import Names, comment_text, identifier, literal
from blockflow.export.torch_lowering import Call, Unsupported, torch_dtype
from blockflow.project import port_text, split_port_text

__all__ = ["ClassWriter", "SMALL_CONSTANT", "parent", "relative"]

#: constants with more elements than this are buffers with their value in the state file
SMALL_CONSTANT = 64


def parent(flat_id: str) -> str:
    return flat_id.rpartition("/")[0]


def relative(flat_id: str, level: str) -> str:
    return flat_id[len(level) + 1:] if level else flat_id


#: what an instance of a generated class already has (nn.Module's public attributes in torch 2.x,
#: the class constants the writer adds, the generator): a Variable or sub-module named so would
#: make register_parameter raise, or hide the method
MODULE_ATTRS = frozenset({
    "T_destination", "add_module", "apply", "bfloat16", "buffers", "call_super_init", "children", "compile",
    "cpu", "cuda", "double", "dump_patches", "eval", "extra_repr", "float", "forward", "get_buffer",
    "get_extra_state", "get_parameter", "get_submodule", "half", "ipu", "load_state_dict", "modules", "mtia",
    "named_buffers", "named_children", "named_modules", "named_parameters", "parameters",
    "register_backward_hook", "register_buffer", "register_forward_hook", "register_forward_pre_hook",
    "register_full_backward_hook", "register_full_backward_pre_hook", "register_load_state_dict_post_hook",
    "register_load_state_dict_pre_hook", "register_module", "register_parameter",
    "register_state_dict_post_hook", "register_state_dict_pre_hook", "requires_grad_", "set_extra_state",
    "set_submodule", "share_memory", "state_dict", "to", "to_empty", "train", "training", "type", "xpu",
    "zero_grad", "generator", "INITIALIZERS", "CONSTANTS", "INPUTS", "OUTPUTS"})


class ClassWriter:
    """Writes the class of one level: the page ("") or one instance's diagram; ``fw`` is the
    file being written (torch_module's writer: helpers, classes, state, the flat program)."""

    def __init__(self, fw, level: str, instance):
        self.fw = fw
        self.program = fw.program
        self.level = level
        self.instance = instance
        self.names = Names()
        self.attrs = Names(MODULE_ATTRS)
        self.init: list[str] = []          # buffers and sub-modules, in the order of the lines
        self.init_vars: dict[str, str] = {}  # Variable attr -> its declaration (written sorted)
        self.initializers: dict[str, tuple] = {}  # random initializers torch draws with initial=None
        self.shares: list[str] = []
        self.constants: list[str] = []     # buffers holding a constant's value (from the .pt)
        self.lines: list[str] = []
        self.updates: list[tuple[str, str]] = []
        self.expr: dict[int, str] = {}
        #: (argument name, flat node) of forward
        self.args: list[tuple[str, str]] = []
        self.state_prefix = ""
        self.random = False

    # --------------------------------------------------------------------------- names

    def local(self, key, text: str) -> str:
        return self.names(key, text)

    def temp(self, base: str = "t") -> str:
        return self.names.fresh(base)

    def statement(self, code: str) -> None:
        self.lines.append(code)

    def helper(self, name: str, source: str) -> None:
        self.fw.helper(name, source)

    def random_generator(self) -> str:
        self.random = True
        return "self.generator"

    def update(self, call: Call, ref: str, expr: str) -> None:
        pos = call.input_names.index(ref)
        target = call.ins[pos]
        if not (isinstance(target, str) and target.startswith("self.")):
            raise Unsupported(f"{call.node}: its ref input '{ref}' is not a Variable of this module")
        name = self.temp(f"{identifier(relative(call.node, self.level))}_{identifier(ref)}")
        self.lines.append(f"{name} = {expr}")
        self.updates.append((target, name))

    # ----------------------------------------------------------------------- the class body

    def class_body(self, class_name: str, doc: str, top: bool = False) -> str:
        units = self._units()
        for kind, item in units:
            if kind == "step":
                self._step(item)
            else:
                self._instance(item)
        for left in self.fw.shared_vars.get(self.level, []):
            self._variable_attr(left, self.program.step(self.fw.program.hierarchy.shared[left]))
        returns = self._returns(top)
        init = (["super().__init__()"] + [self.init_vars[k] for k in sorted(self.init_vars)] + self.init
                + self.shares)
        if self.random:
            init.append("self.generator = None  # the Model's torch.Generator, set by Model.__init__")
        head = [f"class {class_name}(nn.Module):", f'    """{doc}"""', ""]
        if self.initializers:
            head += [f"    INITIALIZERS = {literal(dict(sorted(self.initializers.items())))}", ""]
        if self.constants:
            head += [f"    CONSTANTS = {literal(tuple(self.constants))}", ""]
        if top:
            head += [f"    INPUTS = {literal(tuple(node for _, node in self.args))}",
                     f"    OUTPUTS = {literal(tuple(port_text(self.program.slot(s).node, self.program.slot(s).port) for s in self.fw.out_slots))}",
                     "",
                     f"    def __init__(self, initial=\"beside\", seed={self.fw.seed}):",
                     "        \"\"\"initial: \\\"beside\\\" (the .pt file beside this one), a path, a state_dict,",
                     "        or None (torch's initializers, seeded with ``seed``).\"\"\""]
        else:
            head.append("    def __init__(self):")
        body = head + [f"        {x}" for x in init]
        if top:
            body += ["        self.generator = torch.Generator().manual_seed(seed)",
                     "        for module in self.modules():",
                     "            if hasattr(module, \"generator\"):",
                     "                module.generator = self.generator",
                     "        if initial is None:",
                     "            draw_initial(self, self.generator)",
                     "            load_initial(self, constants_only=True)",
                     "        elif isinstance(initial, dict):",
                     "            self.load_state_dict(initial)",
                     "        else:",
                     "            load_initial(self, None if initial == \"beside\" else initial)"]
        args = ", ".join(["self"] + [a for a, _ in self.args])
        body += ["", f"    def forward({args}):"]
        if top:
            for arg, node in self.args:
                if split_port_text(node)[0] in self.fw.needs_grad:   # a dataset's output is node:port
                    if self.program.slot(self.program.resolve_target(node)).type.dtype.kind == "f":
                        body.append(f"        {arg} = {arg} if {arg}.requires_grad else "
                                    f"{arg}.detach().requires_grad_(True)")
        lines = self._lines_reading_starts(self.lines + [f"return {returns}"])
        body += [f"        {x}" for x in lines[:-1]]
        if self.updates:
            body.append("        with torch.no_grad():  # state updates land when the run ends")
            body += [f"            {target}.copy_({name})" for target, name in self.updates]
        body.append(f"        {lines[-1]}")
        return "\n".join(body)

    def _lines_reading_starts(self, lines: list) -> list[str]:
        """``lines`` with each Variable the run updates read through a copy made when the run
        starts: the update writes it in place when forward ends, yet the outputs returned are the
        values the run read, and a later backward through them needs those (torch refuses a
        tensor changed in place since it was used)."""
        if not self.updates:
            return list(lines)
        keys = self.fw.variable_keys     # a Variable's value (a str), not an optimizer's slot
        targets = sorted({t for t, _ in self.updates
                          if isinstance(keys.get(self.state_prefix + t[len("self."):]), str)})
        if not targets:
            return list(lines)
        starts = {t: self.temp(f"{t[len('self.'):]}_start") for t in targets}
        used = re.compile(r"(?<![\w.])(" + "|".join(re.escape(t) for t in targets) + r")(?!\w)")
        return ([f"{starts[t]} = {t}.clone()" for t in targets]
                + [used.sub(lambda m: starts[m.group(1)], line) for line in lines])

    def _returns(self, top: bool) -> str:
        if top:
            exprs = [self.expr[s] for s in self.fw.out_slots]
        else:
            exprs = [self._output_expr(flat) for flat in self.instance.outputs.values()]
        if len(exprs) == 1:
            return exprs[0]
        return "(" + ", ".join(exprs) + ")"

    def _output_expr(self, flat: str) -> str:
        st = self.program.step(flat)
        return self.expr[st.outputs[0]]

    # --------------------------------------------------------------------------- ordering

    def _units(self) -> list:
        """This level's steps and child instances in an order that respects their wires."""
        program, level = self.program, self.level
        steps = self.fw.steps_by_level.get(level, [])
        children = self.fw.children.get(level, [])
        units: dict = {}
        drawn = self._drawn_order()
        if not level:   # the page: only what the outputs need (an instance computes all it gives)
            steps = [st for st in steps if st.node in self.fw.needed]
            children = [p for p in children if any(f in self.fw.needed for f in self.fw.instances[p].outputs.values())]
        for st in steps:
            units[st.node] = ("step", st, (drawn.get(relative(st.node, level), len(drawn)), st.index))
        for path in children:
            inst = self.fw.instances[path]
            units[path] = ("instance", inst, (drawn.get(relative(path, level), len(drawn)), 0))
        unit_of = {}

        def unit(node: str):
            hit = unit_of.get(node)
            if hit is None:
                n = node
                while n and n not in units:
                    n = parent(n)
                    if n and not n.startswith(level + "/") and level:
                        n = ""
                hit = unit_of[node] = n if n in units else None
            return hit

        deps = {k: set() for k in units}
        for a, b in program.graph.edges:
            st = program.step(a)
            if st is not None and st.role == "variable":
                continue
            ua, ub = unit(a), unit(b)
            if ua is not None and ub is not None and ua != ub:
                deps[ub].add(ua)
        users: dict = {k: [] for k in units}
        for k, ds in deps.items():
            for d in ds:
                users[d].append(k)
        waiting = {k: len(ds) for k, ds in deps.items()}
        ready = [(units[k][2], k) for k, n in waiting.items() if n == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            _, k = heapq.heappop(ready)
            order.append(units[k][:2])
            for u in users[k]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    heapq.heappush(ready, (units[u][2], u))
        if len(order) != len(units):
            stuck = sorted(k for k, n in waiting.items() if n > 0)
            raise ExportError(f"instances wired in a loop at {self.level or 'the page'}: "
                              f"{', '.join(stuck[:5])}; sub-modules cannot call each other in a loop")
        return order

    def _drawn_order(self) -> dict:
        """{node id drawn at this level: its place in the diagram}: ties in the order of lines
        follow the drawing, so every instance of a composite gets the same lines."""
        project = self.fw.project
        if self.instance is None:
            page = project.page(self.program.page_name)
        else:
            comp = project.composites.get(self.instance.composite)
            page = comp.page if comp is not None else None
        return {} if page is None else {nid: i for i, nid in enumerate(page.nodes)}

    # ----------------------------------------------------------------------------- values

    def _slot_expr(self, slot: int | None) -> str | None:
        if slot is None:
            return None
        found = self.expr.get(slot)
        if found is not None:
            return found
        s = self.program.slot(slot)
        if s.const:
            return self._constant(slot, s)
        if s.state:        # optimizer slot state kept with a Variable
            return self._state_attr(s.node, s.port, s.type)
        key = (self.level, s.node)
        left = self.fw.shared_by_level.get(key)
        if left is None and self.level:
            # a Variable read from a shared instance, from inside one of its nested levels
            for (lvl, read), lft in self.fw.shared_by_level.items():
                if read == s.node and lvl.startswith(self.level + "/"):
                    left = lft
        if left is not None:
            return self._variable_attr(left, self.program.step(s.node))
        raise ExportError(f"{self.program.full_name(s.node)} is read from "
                          f"{self.level or 'the page'} where it is not drawn")

    def _constant(self, slot: int, s) -> str:
        value = np.asarray(s.type.value)
        dtype = torch_dtype(value.dtype)
        if value.size <= SMALL_CONSTANT:
            expr = _small_tensor(value, dtype)
            name = self.local(("const", slot), f"{relative(s.node, self.level)}_{s.port}")
            self.lines.append(f"{name} = {expr}")
        else:
            name = self._constant_buffer(("const", slot), f"{relative(s.node, self.level)}_{s.port}", value)
        self.expr[slot] = name
        return name

    def constant_value(self, call: Call, value: np.ndarray) -> str:
        """A block's own constant (Const's value, a table): literal when small, else a buffer."""
        dtype = torch_dtype(value.dtype)
        if value.size <= SMALL_CONSTANT:
            return _small_tensor(value, dtype)
        return self._constant_buffer(object(), f"{relative(call.node, self.level)}_value", value)

    def _constant_buffer(self, key, text: str, value: np.ndarray) -> str:
        """A constant too big to write as a literal: a buffer whose value is in the .pt file,
        loaded even when the Variables are drawn anew (CONSTANTS names them)."""
        attr = self.attrs(key, text)
        self.init.append(f"self.register_buffer({literal(attr)}, torch.empty({literal(tuple(value.shape))}, "
                         f"dtype={torch_dtype(value.dtype)}), persistent=True)")
        self._state(attr, value)
        self.constants.append(attr)
        return f"self.{attr}"

    def _state(self, attr: str, value) -> None:
        self.fw.state[f"{self.state_prefix}{attr}"] = np.asarray(value)

    def _variable_attr(self, flat: str, st: Step) -> str:
        attr = self.attrs(("var", flat), relative(flat, self.level))
        expr = f"self.{attr}"
        if ("declared", flat) in self.attrs._given:
            return expr
        self.attrs._given[("declared", flat)] = True
        t = self.program.slot(st.outputs[0]).type
        shape, dtype = literal(tuple(t.shape)), torch_dtype(t.dtype)
        init = _initializer_expr(st.attrs, shape, dtype)
        if init.startswith("torch.empty"):
            self.initializers[attr] = (st.attrs["initializer"], float(st.attrs.get("stddev", 1.0)),
                                       float(st.attrs.get("scale", 1.0)))
        if st.attrs.get("trainable", True):
            self.init_vars[attr] = f"self.{attr} = nn.Parameter({init})"
        else:
            self.init_vars[attr] = f"self.register_buffer({literal(attr)}, {init})"
        self._state(attr, self.program.variable_values[st.node])
        self.fw.variable_keys[f"{self.state_prefix}{attr}"] = st.node
        return expr

    def _state_attr(self, var: str, key: str, ttype) -> str:
        attr = self.attrs(("slot", var, key), f"{relative(var, self.level)}_{key}")
        if ("declared", attr) not in self.attrs._given:
            self.attrs._given[("declared", attr)] = True
            self.init_vars[attr] = (f"self.register_buffer({literal(attr)}, torch.zeros({literal(tuple(ttype.shape))}, "
                                    f"dtype={torch_dtype(ttype.dtype)}))")
            value = self.program.slot_values.get((var, key))
            self._state(attr, value if value is not None else np.zeros(ttype.shape, ttype.dtype))
            self.fw.variable_keys[f"{self.state_prefix}{attr}"] = (var, key)
        return f"self.{attr}"

    # ------------------------------------------------------------------------------ steps

    def _step(self, st: Step) -> None:
        program = self.program
        rel = relative(st.node, self.level)
        self.fw.blocks.add(st.spec.name)
        if st.role == "variable":
            self.expr[st.outputs[0]] = self._variable_attr(st.node, st)
            return
        if st.role == "placeholder" or st.spec.is_dataset:
            if self.level:
                raise ExportError(f"{program.full_name(st.node)}: a {st.spec.name} inside a composite "
                                  f"cannot be exported; draw it on the page")
            for o in st.outputs:
                port = program.slot(o).port
                arg = self.local(("arg", o), rel if len(st.outputs) == 1 else f"{rel}_{port}")
                self.expr[o] = arg
                self.args.append((arg, st.node if len(st.outputs) == 1 else port_text(st.node, port)))
            return
        if st.spec.name == "Input" and self.instance is not None:
            port = next(p for p, f in self.instance.inputs.items() if f == st.node)
            arg = self.local(("arg", st.node), port, )
            self.args.append((arg, st.node))
            self.expr[st.outputs[0]] = arg
            return
        if st.spec.name in ("Input", "Output"):
            src = self._slot_expr(st.inputs[0])
            self.expr[st.outputs[0]] = src
            return
        if st.role == "gradients":
            self._gradients(st)
            return
        call = self._call(st)
        try:
            result = self.fw.table[st.spec.name](call)
        except Unsupported as exc:
            raise ExportError(f"{program.full_name(st.node)} ({st.spec.name}): {exc}") from None
        self._bind_outputs(st, result)

    def _call(self, st: Step) -> Call:
        return Call(**call_fields(self.program, st, self._slot_expr), writer=self)

    def _bind_outputs(self, st: Step, result) -> None:
        rel = relative(st.node, self.level)
        outs = st.outputs
        names = [self.local(("slot", o), rel if len(outs) == 1 else f"{rel}_{self.program.slot(o).port}")
                 for o in outs]
        if not outs:
            if result:
                self.lines.append(f"{result}" if isinstance(result, str) else "; ".join(result))
            return
        if isinstance(result, str):
            target = names[0] if len(names) == 1 else ", ".join(names)
            self.lines.append(f"{target} = {result}")
        else:
            if len(result) != len(names):
                raise ExportError(f"{self.program.full_name(st.node)}: its lowering gave {len(result)} "
                                  f"outputs for {len(names)}")
            for n, r in zip(names, result):
                self.lines.append(f"{n} = {r}")
        for o, n in zip(outs, names):
            self.expr[o] = n

    def _instance(self, inst) -> None:
        program = self.program
        rel = relative(inst.path, self.level)
        args = []
        for port, flat in inst.inputs.items():
            st = program.step(flat)
            args.append(self._slot_expr(st.inputs[0]) if st is not None else "None")
        attr = self.attrs(("inst", inst.path), rel)
        if inst.shares is not None:
            shared_attr = self.attrs(("inst", inst.shares), relative(inst.shares, self.level))
            child_class = self._child_class(inst)
            if self.fw.classes.get(child_class) != self._shared_class(inst.shares):
                raise ExportError(f"{program.full_name(inst.path)} shares the Variables of "
                                  f"{program.full_name(inst.shares)} but lowers to different code")
            self.shares.append(f"self.{attr} = self.{shared_attr}  # shares its Variables")
        else:
            name = self.fw.class_for(self._child_class(inst), inst.composite)
            self.init.append(f"self.{attr} = {name}()")
            self.fw.class_of_path[inst.path] = name
        outs = list(inst.outputs.values())
        names = [self.local(("out", f), f"{rel}_{p}") for p, f in inst.outputs.items()]
        target = ", ".join(names) if names else "_"
        self.lines.append(f"{target} = self.{attr}({', '.join(args)})")
        for flat, n in zip(outs, names):
            st = program.step(flat)
            if st is not None:
                self.expr[st.outputs[0]] = n

    def _shared_class(self, path: str):
        return self.fw.class_of_path.get(path)

    def _child_class(self, inst) -> str:
        cache = self.fw.texts
        text = cache.get(inst.path)
        if text is None:
            child = ClassWriter(self.fw, inst.path, inst)
            child.state_prefix = self.state_prefix + self.attrs(("inst", inst.path), relative(inst.path, self.level)) + "."
            text = cache[inst.path] = child.class_body("_BODY_", f"The composite {comment_text(inst.composite, 60)}.")
        return text

    def _gradients(self, st: Step) -> None:
        ys = [self._slot_expr(s) for s in st.inputs[0]]
        xs = [self._slot_expr(s) for s in st.inputs[1]]
        seeds = [self._slot_expr(s) for s in (st.inputs[2] if len(st.inputs) > 2 and st.inputs[2] else ())]
        grad_outputs = [seeds[i] if i < len(seeds) else f"torch.ones_like({y})" for i, y in enumerate(ys)]
        rel = relative(st.node, self.level)
        raw = self.temp(f"{identifier(rel)}_raw")
        self.lines.append(f"{raw} = torch.autograd.grad([{', '.join(ys)}], [{', '.join(xs)}], "
                          f"grad_outputs=[{', '.join(grad_outputs)}], allow_unused=True, retain_graph=True)")
        # retain_graph: the loss is usually differentiated later through the same forward values
        names = [self.local(("slot", o), f"{rel}_{i}") for i, o in enumerate(st.outputs)]
        for i, (n, x) in enumerate(zip(names, xs)):
            # tf.gradients gives zeros where an x does not reach the ys (or only through a cut)
            self.lines.append(f"{n} = {raw}[{i}] if {raw}[{i}] is not None else torch.zeros_like({x})")
        for o, n in zip(st.outputs, names):
            self.expr[o] = n


def _small_tensor(value: np.ndarray, dtype: str) -> str:
    """A literal tensor; an empty one reshaped, since its nested list loses the sizes after a 0."""
    expr = f"torch.tensor({literal(value)}, dtype={dtype})"
    return f"{expr}.reshape({literal(tuple(value.shape))})" if value.size == 0 else expr


def _initializer_expr(attrs: dict, shape: str, dtype: str) -> str:
    """A Variable's first value from its initializer, drawn by torch (Model(initial=None))."""
    kind = attrs.get("initializer", "zeros")
    if kind == "zeros":
        return f"torch.zeros({shape}, dtype={dtype})"
    if kind == "ones":
        return f"torch.ones({shape}, dtype={dtype})"
    if kind == "value":
        return f"torch.tensor({literal(np.asarray(attrs.get('initial_value')))}, dtype={dtype})" \
            if np.size(attrs.get("initial_value")) <= SMALL_CONSTANT else f"torch.zeros({shape}, dtype={dtype})"
    # random initializers: drawn by draw_initial() with the Model's generator (INITIALIZERS)
    return f"torch.empty({shape}, dtype={dtype})"
