"""A port index of thousands of digits (``xs[111...]``) passes the file's port pattern; turning it
into an int raised ValueError (Python refuses int() of more than 4,300 digits), which `blockflow
check` reported as an internal error (exit 5). Such a port names no list entry: it is reported as
any port the block does not have."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from blockflow.compile.compiler import compile_project
from blockflow.io.project_io import load_project
from blockflow.project import split_port

ROOT = Path(__file__).resolve().parents[2]
LONG = "1" * 5000


def test_split_port_names_no_entry_past_nine_digits():
    assert split_port("xs[123456789]") == ("xs", 123456789)
    assert split_port(f"xs[{LONG}]") == (f"xs[{LONG}]", None)
    assert split_port("xs[1234567890]") == ("xs[1234567890]", None)


def _file(tmp_path) -> Path:
    doc = json.loads((ROOT / "sample_projects" / "fgsm_adversarial_training.bflow.json").read_text())
    for page in doc["pages"]:
        for e in page["edges"]:
            if e["to"] == "grad_x:xs[0]":
                e["to"] = f"grad_x:xs[{LONG}]"
    path = tmp_path / "long_port.bflow.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_wire_to_a_port_index_of_5000_digits_is_a_diagnostic(tmp_path):
    program = compile_project(load_project(_file(tmp_path)))
    assert not program.ok
    assert any("which is not an input of Gradients" in d.message and d.node == "grad_x" for d in program.errors)


def test_check_reports_it_with_exit_code_1_not_an_internal_error(tmp_path):
    code = "import sys\nfrom blockflow.console import main\nsys.exit(main(sys.argv[1:]))\n"
    r = subprocess.run([sys.executable, "-c", code, "check", str(_file(tmp_path))], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stderr[-500:]
    assert "internal error" not in r.stderr and "not an input of Gradients" in r.stdout
