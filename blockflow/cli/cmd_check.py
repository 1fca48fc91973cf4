"""``blockflow check``: compile a project's pages and list their diagnostics, wire types and (with
--grad) each page's gradient check, as text or JSON."""
from __future__ import annotations

import json
import sys

from blockflow.cli import inputs
from blockflow.cli.exits import EXIT_DIAGNOSTICS, EXIT_OK, EXIT_USAGE, CliError
from blockflow.cli.output import json_number, print_diagnostics
from blockflow.project import split_port_text


def cmd_check(args) -> int:
    from blockflow.compile.compiler import compile_page, project_files

    project = inputs.load(args.project)
    registry = inputs.registry()
    # The pages themselves, not their names: looking each name up again scans the page list,
    # which made checking a project of many pages quadratic in their number.
    pages = project.pages if args.page is None else [project.page(args.page)]
    files = project_files(project)
    all_diags, summary = [], []
    for page in pages:
        program = compile_page(page, registry, files=files, composites=project.composites)
        all_diags.extend(program.diagnostics)
        summary.append((program, len(program.errors)))
    checks = _grad_checks(args, pages, registry, summary, project.composites, files) if args.grad is not None else {}
    if args.json:
        json.dump(_check_json(args, summary, all_diags, checks), sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        _print_check(args, summary, all_diags, checks)
    errors = sum(n for _, n in summary)
    failed = any(r is not None and not r.passed for r, _ in checks.values())
    return EXIT_DIAGNOSTICS if errors or failed else EXIT_OK


def _wires(program) -> list:
    """The page's typed wires and their types, in a stable order."""
    return sorted((e, program.wire_type(e)) for e in program.typed_wires())


def _check_json(args, summary, all_diags, checks) -> dict:
    out = {"project": str(args.project),
           "pages": [{"page": p.page_name, "blocks": len(p.steps), "errors": n,
                      "edges": [{"from": f"{e.src}:{e.src_port}", "to": f"{e.dst}:{e.dst_port}",
                                 "dtype": t.dtype.name,
                                 "shape": [d if d is not None else None for d in t.shape]}
                                for e, t in _wires(p)]}
                     for p, n in summary],
           "diagnostics": [{"severity": d.severity, "page": d.page, "node": d.node, "port": d.port,
                            "message": d.message} for d in all_diags]}
    if args.grad is not None:
        out["gradient_checks"] = [_grad_check_json(page, r, why) for page, (r, why) in checks.items()]
    return out


def _grad_check_json(page: str, r, why: str) -> dict:
    if r is None:
        return {"page": page, "skipped": why}
    return {"page": page, "target": r.label, "passed": r.passed, "rtol": r.rtol,
            "inputs": [{"input": e.name, "analytic": json_number(e.analytic),
                        "numeric": json_number(e.numeric), "relative_error": json_number(e.error),
                        "passed": e.passed, "problem": e.problem}
                       for e in r.entries]}


def _print_check(args, summary, all_diags, checks) -> None:
    print_diagnostics(all_diags, sys.stdout)
    for program, n in summary:
        status = "ok" if n == 0 else f"{n} error{'s' if n != 1 else ''}"
        print(f"page '{program.page_name}': {len(program.steps)} blocks, {len(program.typed_wires())} wires: {status}")
        if args.verbose:
            for e, t in _wires(program):
                print(f"  {e}: {t.describe()}")
        if program.page_name in checks:
            r, why = checks[program.page_name]
            print("  " + str(r).replace("\n", "\n  ") if r is not None else f"  gradient check skipped: {why}")


def _grad_checks(args, pages, registry, summary, composites=None, files=None) -> dict:
    """``check --grad``: each compiled page's gradients against central differences (float64)."""
    from blockflow.run.gradcheck import check_page

    out = {}
    for page, (program, errors) in zip(pages, summary):
        name = program.page_name
        target = args.grad or None
        if errors:
            out[name] = (None, "the page does not compile")
        elif target is None and program.loss is None:
            if args.page is not None:
                raise CliError(f"page '{name}' marks no loss: name the target, --grad NODE[:PORT]", EXIT_USAGE)
            out[name] = (None, "the page marks no loss")
        elif target is not None and not _has_block(program, split_port_text(target)[0]):
            if args.page is not None or len(summary) == 1:
                raise CliError(f"page '{name}' has no block '{split_port_text(target)[0]}'", EXIT_USAGE)
            out[name] = (None, f"no block '{split_port_text(target)[0]}' on this page")
        else:
            out[name] = (check_page(page, registry, target=target, composites=composites, files=files), "")
    if args.grad and all(r is None and why.startswith("no block") for r, why in out.values()):
        raise CliError(f"--grad {args.grad}: no page has a block '{split_port_text(args.grad)[0]}'", EXIT_USAGE)
    return out


def _has_block(program, node: str) -> bool:
    """A block of the page, one inside an instance (``d1/W``), or an instance (``d2``, its ports)."""
    return program.step(node) is not None or program.instance(node) is not None
