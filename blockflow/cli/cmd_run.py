"""``blockflow run``: run a page forward (and backward from its loss or a named target) and print
its values and gradients, as text or JSON."""
from __future__ import annotations

import sys

from blockflow.arrayout import JsonArray, write_json
from blockflow.cli import inputs
from blockflow.cli.exits import EXIT_DIAGNOSTICS, EXIT_OK, EXIT_USAGE, CliError
from blockflow.cli.output import print_diagnostics, summarize
from blockflow.errors import ProjectError
from blockflow.project import port_text


def cmd_run(args) -> int:
    from blockflow.compile.compiler import compile_project
    from blockflow.run.runtime import run

    project = inputs.load(args.project)
    program = compile_project(project, args.page, inputs.registry())
    if not program.ok:
        print_diagnostics(program.diagnostics, sys.stderr)
        raise CliError(f"{args.project}: the diagram has errors; nothing was run", EXIT_DIAGNOSTICS)
    feeds = _feeds(program, args.feed)
    target, seed = _gradient_target(args, program, sum(v.nbytes for v in feeds.values()))
    fetch = [program.resolve_target(f) for f in args.fetch] if args.fetch else None   # before a long run
    result = run(program, feeds, target=target, grad_seed=seed, record=True, split=args.split)
    if args.json:
        write_json(_result_json(args, program, result, fetch), sys.stdout)
        sys.stdout.write("\n")
    else:
        _print_result(program, result, fetch)
    return EXIT_OK


def _gradient_target(args, program, held: int) -> tuple:
    """(the target to differentiate, or None for a forward run; the --grad-seed array or None),
    checked before the run: a float output, a scalar unless a seed is given."""
    target = None
    if not args.forward_only:
        if args.grad:
            target = args.grad
        elif program.loss is not None:
            target = port_text(*program.loss)
    seed = None
    if args.grad_seed is not None:
        if target is None:
            raise CliError("--grad-seed needs a gradient target (--grad, or a page with a loss)", EXIT_USAGE)
        _, seed = inputs.parse_feed(f"seed={args.grad_seed}", option="--grad-seed", held=held)
    if target is not None:
        try:
            ttype = program.target_slot(target).type
        except ProjectError as exc:
            raise CliError(f"--grad {target}: {exc}", EXIT_USAGE) from None
        if not ttype.is_float:
            raise CliError(f"--grad {target}: that output is {ttype}; only float values can be differentiated",
                           EXIT_USAGE)
        if seed is None and ttype.size != 1:
            raise CliError(f"--grad {target}: that output is {ttype}, not a scalar: give --grad-seed VALUE "
                           f"of its shape, or name a scalar output", EXIT_USAGE)
    return target, seed


def _feeds(program, specs) -> dict:
    """The --feed options as {Placeholder: array}; a name that is not a Placeholder of the page,
    or one given twice, is a usage error found before any file is read. Each file is judged
    against the memory budget with the feeds read before it: judged alone, each of N files
    under the budget was read, N times the budget, before the run refused them together."""
    placeholders = [st.node for st in program.steps if st.role == "placeholder"]
    feeds: dict = {}
    held = 0
    for spec in specs:
        name, sep, _ = spec.partition("=")
        if sep and name and name not in placeholders:
            raise CliError(f"--feed {name}: page '{program.page_name}' has no Placeholder '{name}' (its "
                           f"Placeholders: {', '.join(placeholders) or 'none'})", EXIT_USAGE)
        if name in feeds:
            raise CliError(f"--feed {name}: given twice", EXIT_USAGE)
        name, value = inputs.parse_feed(spec, held=held)
        feeds[name] = value
        held += value.nbytes
    return feeds


def _selected(program, fetch):
    if fetch is None:
        return [o for st in program.steps for o in st.outputs]
    return fetch


def _result_json(args, program, result, fetch) -> dict:
    out = {
        "project": str(args.project),
        "page": program.page_name,
        "scope": program.scope,
        "target": None if result.target is None else port_text(*result.target),
        "values": {},
        "gradients": {},
    }
    full = args.all_values

    def array_to_json(arr):     # written piecewise when the document is (blockflow.arrayout)
        return JsonArray(arr, full)

    for s in _selected(program, fetch):
        slot = program.slot(s)
        key = (slot.node, slot.port)
        out["values"][port_text(*key)] = array_to_json(result.values[key])
        if key in result.grads:
            out["gradients"][port_text(*key)] = array_to_json(result.grads[key])
    if result.target is not None:
        paths = result.paths
        out["variable_gradients"] = {k: array_to_json(v) for k, v in result.variable_grads.items()}
        out["edges"] = [
            {"from": f"{e.src}:{e.src_port}", "to": f"{e.dst}:{e.dst_port}",
             "gradient": array_to_json(result.edge_grads[e]) if e in result.edge_grads else None,
             "status": "flows" if e in paths.flows else "cut" if e in paths.cut else "unreached",
             "cut_by": list(paths.cut.get(e, ())), "reason": paths.reason(e)}
            for e in sorted(program.typed_wires())
        ]
    return out


def _print_result(program, result, fetch):
    target = "" if result.target is None else f", gradients of {program.full_name(result.target[0])}:{result.target[1]}"
    print(f"page '{program.page_name}': {len(program.steps)} blocks{target}")
    rows = []
    for s in _selected(program, fetch):
        slot = program.slot(s)
        key = (slot.node, slot.port)
        name = f"{program.full_name(key[0])}:{key[1]}"
        rows.append((name, slot.type.describe(), summarize(result.values[key]),
                     summarize(result.grads[key]) if key in result.grads else None))
    width = max((len(r[0]) for r in rows), default=10)
    twidth = max((len(r[1]) for r in rows), default=5)
    for name, t, value, grad in rows:
        print(f"  {name:<{width}}  {t:<{twidth}}  = {value}")
        if grad is not None:
            print(f"  {'':<{width}}  {'':<{twidth}}  d = {grad}")
    if result.target is not None:
        _print_cut_wires(program, result.paths)


def _print_cut_wires(program, paths) -> None:
    cut = sorted(paths.cut.items())
    if cut:
        print("wires cut from the gradient:")
        for e, _ in cut:
            print(f"  {e}: {paths.reason(e)}")
    if paths.cut_sources:
        for node, by in sorted(paths.cut_sources.items()):
            print(f"  {program.full_name(node)} receives no gradient: cut by {', '.join(by)}")
