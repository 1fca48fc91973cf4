"""The block library as a lazy provider (issue 18: a command imports what it uses): the committed
catalog (blocks/catalog.py) is current, a registry loading modules as blocks are asked for holds
exactly what an eager one holds, and the registry's rules (a name declared twice, a part that
fails to import, threads asking at once) hold for lazy parts too."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
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


def test_a_part_that_fails_to_import_is_a_registry_error_naming_it():
    def load(part):
        raise ImportError(f"No module named 'broken_{part}'")

    reg = Registry()
    reg.add_lazy("mine = mypkg:blocks", {"Broken": "bad_module"}, {}, load)
    with pytest.raises(RegistryError, match=r"block package 'mine = mypkg:blocks' failed to load its part "
                                            r"'bad_module': No module named 'broken_bad_module'"):
        reg.get("Broken")


def test_threads_asking_at_once_load_each_part_once():
    calls = []

    def load(part):
        calls.append(part)
        return module_blocks(part)

    reg = Registry()
    reg.add_lazy("core", all_blocks.blocks, all_blocks.aliases, load)
    names = sorted(all_blocks.blocks)
    errors = []

    def ask():
        try:
            for name in names:
                assert reg.get(name) is not None
        except Exception as exc:  # reported below: a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sorted(calls) == sorted(set(catalog.MODULES))
