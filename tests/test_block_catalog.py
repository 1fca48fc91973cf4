"""The block library as a lazy provider (issue 18: a command imports what it uses): the committed
catalog (blocks/catalog.py) is current, a registry loading modules as blocks are asked for holds
exactly what an eager one holds, and the registry's rules (a name declared twice, a part that
fails to import, threads asking at once) hold for lazy parts too."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from blockflow.errors import RegistryError
from blockflow.registry import Registry
from blockflow.spec import Input, Output, block
from blockflow_blocks import all_blocks, catalog, module_blocks

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import make_block_catalog  # noqa: E402


def _lazy_registry() -> Registry:
    reg = Registry()
    reg.add_lazy("core = blockflow_blocks:all_blocks", all_blocks.blocks, all_blocks.aliases, all_blocks.load)
    return reg


def _plain_block(name: str, aliases=()):
    @block(name, category="test_ops", aliases=aliases)
    class Plain:
        """A test block."""

        inputs = (Input("x"),)
        outputs = (Output("y"),)

        def infer(x):
            return x

        def forward(x):
            return x

    return Plain


def test_the_committed_catalog_is_current():
    assert (ROOT / "blocks" / "catalog.py").read_text(encoding="utf-8") == make_block_catalog.catalog_source(), \
        "blocks/catalog.py is stale: run python tools/make_block_catalog.py"


def test_a_lazy_registry_holds_what_an_eager_one_holds():
    eager, lazy = Registry(all_blocks()), _lazy_registry()
    for name in eager.names():
        assert name in lazy and lazy.get(name) is eager.get(name), name
    aliases = {a for spec in eager for a in spec.aliases} | {"NoSuchBlock", "Sub", "Exp"}
    for name in aliases:
        assert lazy.resolve_alias(name) == eager.resolve_alias(name), name
    assert lazy.get("NoSuchBlock") is None and "NoSuchBlock" not in lazy
    assert lazy.names() == eager.names() and len(lazy) == len(eager)
    assert {k: [s.name for s in v] for k, v in lazy.categories().items()} == \
           {k: [s.name for s in v] for k, v in eager.categories().items()}


def test_asking_for_a_block_imports_its_module_only():
    code = ("import sys, json\nfrom blockflow.registry import default_registry\n"
            "reg = default_registry()\nbefore = sorted(m for m in sys.modules if m.startswith('blockflow_blocks.'))\n"
            "assert reg.get('Exp') is not None and reg.resolve_alias('Sub') == 'Subtract'\n"
            "after = sorted(m for m in sys.modules if m.startswith('blockflow_blocks.'))\n"
            "print(json.dumps([before, after]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    before, after = json.loads(r.stdout)
    assert before == ["blockflow_blocks.catalog"]
    # Exp's module and the helpers it imports; no other module declaring blocks
    declaring = {f"blockflow_blocks.{m}" for m in catalog.MODULES}
    assert set(after) & declaring == {"blockflow_blocks.math_unary"}


def test_a_plugin_naming_a_lazy_block_is_refused_naming_both_places():
    reg = _lazy_registry()
    with pytest.raises(RegistryError, match=r"block 'Exp' is declared twice: in blockflow_blocks\.math_unary\.Exp "
                                            r"and in .*Plain"):
        reg.add(_plain_block("Exp"))
    other = Registry([_plain_block("Exp")])
    with pytest.raises(RegistryError, match=r"block 'Exp' is declared twice: in .*Plain and in core ="):
        other.add_lazy("core = blockflow_blocks:all_blocks", all_blocks.blocks, all_blocks.aliases, all_blocks.load)


def _failing(part):
    raise ImportError(f"No module named 'broken_{part}'")


def test_a_part_that_fails_to_import_is_a_registry_error_naming_it_each_time():
    reg = Registry()
    reg.add_lazy("mine = mypkg:blocks", {"Broken": "bad_module", "Also": "bad_module"}, {"Br": "Broken"}, _failing)
    for name in ("Broken", "Also", "Broken"):
        with pytest.raises(RegistryError, match=r"block package 'mine = mypkg:blocks' failed to load its part "
                                                r"'bad_module': No module named 'broken_bad_module'"):
            reg.get(name)
    assert "Broken" in reg and reg.resolve_alias("Br") == "Broken"   # still what the provider says


def test_a_lenient_registry_skips_a_broken_part_says_so_and_keeps_the_rest():
    said = []
    reg = Registry(strict=False, report=lambda where, problem: said.append((where, problem)))
    reg.add_lazy("mine = mypkg:blocks", {"Broken": "bad_module", "Fine": "good"}, {"Br": "Broken", "Fi": "Fine"},
                 lambda part: _failing(part) if part == "bad_module" else [_plain_block("Fine")])
    assert reg.get("Broken") is None and reg.get("Broken") is None    # the same answer on every ask
    assert "Broken" not in reg and reg.resolve_alias("Br") is None
    assert reg.get("Fine").name == "Fine" and reg.resolve_alias("Fi") == "Fine"
    assert said == reg.problems == [("mine = mypkg:blocks", "failed to load its part 'bad_module': No module "
                                     "named 'broken_bad_module'; its blocks Broken were skipped")]
    assert reg.names() == ["Fine"]


def test_a_stale_catalog_is_refused_naming_the_differences():
    reg = Registry()
    reg.add_lazy("mine = mypkg:blocks", {"Old": "part", "Kept": "part"}, {},
                 lambda part: [_plain_block("Kept"), _plain_block("New")])
    with pytest.raises(RegistryError, match=r"block package 'mine = mypkg:blocks' has a stale catalog: its part "
                                            r"'part' does not declare Old, which the catalog lists; declares New, "
                                            r"which the catalog does not list \(regenerate it: python "
                                            r"tools/make_block_catalog.py\)"):
        reg.get("Kept")
    lenient = Registry(strict=False)
    lenient.add_lazy("mine", {"Old": "part", "Kept": "part"}, {}, lambda part: [_plain_block("Kept")])
    assert lenient.get("Kept") is None and "stale catalog" in lenient.problems[0][1]


def test_a_block_asked_for_while_its_own_part_is_imported_is_not_there_yet():
    reg = Registry()
    seen = []

    def load(part):
        seen.append(reg.get("Inner"))     # a part's import asking for one of its own blocks
        return [_plain_block("Inner")]

    reg.add_lazy("mine", {"Inner": "part"}, {}, load)
    assert reg.get("Inner").name == "Inner" and seen == [None]


def test_a_registry_can_be_copied_and_pickled():
    import copy
    import pickle

    reg = _lazy_registry()
    assert reg.get("Exp") is not None
    for other in (copy.deepcopy(Registry([_plain_block("Solo")])), pickle.loads(pickle.dumps(reg))):
        assert other.names()


def test_threads_asking_at_once_each_find_every_block():
    # each part's import is slowed down: a thread asking for a block of a part another thread is
    # importing must wait for it, not find it missing
    calls = []

    def load(part):
        calls.append(part)
        time.sleep(0.002)
        return module_blocks(part)

    reg = Registry()
    reg.add_lazy("core", all_blocks.blocks, all_blocks.aliases, load)
    names = sorted(all_blocks.blocks)
    errors, found = [], []

    def ask(order):
        try:
            for name in order:
                found.append(name in reg and reg.get(name) is not None)
        except Exception as exc:  # reported below: a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(names[k::2] + names[:k:2],)) for k in range(4)]
    threads.append(threading.Thread(target=lambda: found.append(len(reg.names()) == len(names))))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(found) and len(found) == sum(len(names[k::2] + names[:k:2]) for k in range(4)) + 1
    assert sorted(calls) == sorted(set(catalog.MODULES))


def test_the_command_line_warns_of_a_broken_part_when_it_meets_it(monkeypatch, capsys):
    from blockflow import registry as registry_module
    from blockflow.cli import EXIT_OK, main

    def provider():
        raise AssertionError("a lazy provider is not called")

    provider.blocks = {"Broken": "bad_module"}
    provider.aliases = {}
    provider.load = _failing

    class Plugin:
        name, value = "zplug", "zplug:provider"

        def load(self):
            return provider

    real = registry_module.entrypoints.entry_points
    monkeypatch.setattr(registry_module.entrypoints, "entry_points", lambda group: [*real(group), Plugin()])
    assert main(["blocks"]) == EXIT_OK
    out, err = capsys.readouterr()
    assert "StopGradient" in out and "Broken" not in out
    assert err.strip() == ("blockflow: warning: block package zplug = zplug:provider: failed to load its part "
                           "'bad_module': No module named 'broken_bad_module'; its blocks Broken were skipped")
