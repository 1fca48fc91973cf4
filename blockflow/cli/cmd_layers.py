"""``blockflow layers``: the layer library (composites shipped with the block packages), as a
list, or the Markdown reference (docs/layers.md) generated from the layers' definitions."""
from __future__ import annotations

import sys
from pathlib import Path

from blockflow.cli import inputs
from blockflow.cli.exits import EXIT_FILE, EXIT_OK, EXIT_USAGE, CliError
from blockflow.composite import INPUT_BLOCK, OUTPUT_BLOCK, composite_name
from blockflow.io.library import LibraryError, default_library, outdated, update_layer
from blockflow.textsafe import for_terminal


def cmd_layers(args, library=None) -> int:
    for name in ("project", "update", "save"):    # a caller's Namespace may predate them
        if not hasattr(args, name):
            setattr(args, name, None)
    if args.output and not args.markdown:
        raise CliError("--output writes the Markdown reference: give --markdown too", EXIT_USAGE)
    if (args.update or args.save) and not args.project:
        raise CliError("--update and --save take a project: blockflow layers PROJECT --update NAME... "
                       "--save OUT", EXIT_USAGE)
    if args.update and not args.save:
        raise CliError("--update writes the updated project: give --save OUT (it may be the project "
                       "itself; the old file is kept as a .bak)", EXIT_USAGE)
    if library is None:
        try:
            library = default_library()
        except LibraryError as exc:
            raise CliError(str(exc), EXIT_FILE) from None
    if args.project:
        return _project_layers(args, library)
    if args.markdown:
        text = layers_markdown(library, inputs.registry())
        if args.output is not None:
            inputs.check_output_path("--output", args.output, replaces=False)   # written into
            Path(args.output).write_text(text, encoding="utf-8")
            print(f"wrote {for_terminal(args.output)} ({len(library.layers())} layers)")
        else:
            sys.stdout.write(text)
        return EXIT_OK
    category = None
    width = max((len(i.name) for i in library.layers()), default=0) + 1
    for info in library.layers():
        if info.category != category:
            category = info.category
            print(category)
        print(f"  {info.name:<{width}} v{info.version:<3} {for_terminal(info.summary)}")
    print(f"{len(library.layers())} layers")
    return EXIT_OK


def _project_layers(args, library) -> int:
    """A project's layers from the library: which a newer library version exists of, and (with
    --update) those made the library's version, saved to --save."""
    if args.save is not None:
        inputs.check_output_path("--save", args.save)
    project = inputs.load(args.project)
    stale = {name: (old, new) for name, old, new in outdated(project, library)}
    made = {n: c for n, c in project.composites.items() if (c.origin or {}).get("library")}
    if not args.update:
        width = max((len(n) for n in made), default=0) + 1
        for name, comp in made.items():
            version = comp.origin.get("version")
            if name in stale:
                print(f"  {for_terminal(name):<{width}} v{version} -> v{stale[name][1]}  (blockflow layers "
                      f"PROJECT --update {for_terminal(name)} --save OUT)")
            else:
                print(f"  {for_terminal(name):<{width}} v{version}  up to date")
        print(f"{len(made)} layer(s) from the library, {len(stale)} with a newer version")
        return EXIT_OK
    names = list(stale) if args.update == ["all"] else args.update
    for name in names:
        if name not in project.composites:
            raise CliError(f"the project has no composite '{for_terminal(name)}'", EXIT_USAGE)
        if name not in stale:
            print(f"{for_terminal(name)}: already the library's version")
            continue
        _, report = update_layer(project, library, name)
        print(f"{for_terminal(name)}: v{stale[name][0]} -> v{stale[name][1]}")
        for line in report:
            print(f"  {for_terminal(line)}")
    _save(args.save, project)
    return EXIT_OK


def _save(out: str, project) -> None:
    from blockflow.cli.cmd_train import _plan_save
    from blockflow.io.project_io import save_project
    from blockflow.io.relocate import apply_move

    moves, new_dir = _plan_save(out, project, inputs.registry())
    apply_move(project, moves, new_dir)     # the data first: the saved project never names a missing file
    for note in save_project(project, out).notes:
        print(f"blockflow: note: {for_terminal(note)}", file=sys.stderr)
    print(f"wrote {for_terminal(out)}")


def _value(v) -> str:
    if isinstance(v, dict) and len(v) == 1:
        (kind, name), = v.items()
        return f"{name}" if kind == "$dim" else f"‹{name}›"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if v is None:
        return "any"
    return str(v)


def layers_markdown(library, registry) -> str:
    """The layer reference (docs/layers.md), generated from the layers' definitions (a block's
    settings in the order its declaration lists them)."""
    infos = library.layers()
    out = ["# Layer reference", "",
           "Generated by `blockflow layers --markdown --output docs/layers.md` from the layer library's",
           "definitions (blocks/layers/, made by tools/make_layers.py); do not edit by hand. Each layer is a",
           "composite block: inserting one copies its definition into the project (see",
           "[composites.md](composites.md)). In the tables of blocks inside, `‹name›` is the value of",
           "parameter *name*, and a bare dimension name is the size the instance's input gives it.", "",
           "**Training and inference.** Layers that behave differently (Dropout, the batch normalizations)",
           "ask the `LearningPhase` block: a run that reads the *train* split trains (every training step,",
           "a Run in the editor, `blockflow run`); one that reads *test* or *all* infers (a training's test",
           "evaluations, `blockflow run --split test`). State a layer updates while training (moving",
           "statistics) is kept in its instance's state, saved with the project.", "",
           f"{len(infos)} layers.", ""]
    category = None
    for info in infos:
        if info.category != category:
            category = info.category
            out.append(f"- **{category}**: " + ", ".join(
                f"[{i.name}](#{i.name.lower()})" for i in infos if i.category == category))
    out.append("")
    for info in infos:
        out += _layer_section(info, library.load(info.name), registry)
    return "\n".join(out).rstrip() + "\n"


def _ordered(attrs: dict, spec) -> list:
    order = {a.name: i for i, a in enumerate(spec.attrs)} if spec is not None else {}
    return sorted(attrs.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))


def _layer_section(info, comps, registry) -> list:
    comp = comps[info.name]
    out = [f"## {info.name}", "", f"Category: {info.category}; version {info.version}.", "", comp.doc.strip(), ""]
    if comp.params:
        out += ["| parameter | kind | default | notes |", "|---|---|---|---|"]
        for p in comp.params:
            notes = p.doc + (f" (one of: {', '.join(map(str, p.choices))})" if p.choices else "")
            default = "required" if p.required else f"`{_value(p.default)}`"
            out.append(f"| `{p.name}` | {p.kind} | {default} | {notes} |")
        out.append("")
    page = comp.page
    ports = [(n.attrs.get("name"), n) for n in page.nodes.values() if n.block in (INPUT_BLOCK, OUTPUT_BLOCK)]
    out += ["| port | direction | dtype | shape | notes |", "|---|---|---|---|---|"]
    for name, n in ports:
        way, dtype = ("input", "float32") if n.block == INPUT_BLOCK else ("output", "any")
        out.append(f"| `{name}` | {way} | {n.attrs.get('dtype', dtype)} | {_value(n.attrs.get('shape'))} | "
                   f"{n.attrs.get('doc', '')} |")
    out += ["", "Blocks inside:", "", "| block | type | settings |", "|---|---|---|"]
    for nid, n in page.nodes.items():
        if n.block in (INPUT_BLOCK, OUTPUT_BLOCK):
            continue
        kind = f"composite {composite_name(n.block)}" if composite_name(n.block) else n.block
        settings = ", ".join(f"{k}={_value(v)}" for k, v in _ordered(n.attrs, registry.get(n.block)))
        spec = registry.get(n.block)
        order = {p.name: i for i, p in enumerate(spec.inputs)} if spec is not None else {}
        inline = sorted(n.inputs.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
        settings += "".join(f", {k}={_value(v.tolist())} (inline)" for k, v in inline)
        out.append(f"| `{nid}` | {kind} | {settings.lstrip(', ')} |")
    out.append("")
    return out
