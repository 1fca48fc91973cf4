"""A non-editable install works as well as `pip install -e`.

Builds a wheel from a copy of the source tree (so no build/ or *.egg-info lands in the repo), checks
what it holds, installs it with --target and imports the block registry from that copy.
"""
import configparser
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.packaging

with open(ROOT / "pyproject.toml", "rb") as _f:
    PYPROJECT = tomllib.load(_f)
PACKAGE_DIRS = PYPROJECT["tool"]["setuptools"]["package-dir"]  # import name -> source folder


def pip(*args, cwd):
    result = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                            cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"pip {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """Path of a wheel built from a copy of the package's sources."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", PYPROJECT["project"]["readme"], *(p.name for p in ROOT.glob("LICEN[CS]E*"))):
        shutil.copy(ROOT / name, src / name)
    for folder in sorted(set(PACKAGE_DIRS.values())):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheels")
    pip("wheel", ".", "--no-deps", "--no-build-isolation", "-w", str(out), cwd=src)
    (built,) = out.glob("blockflow-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_names(wheel):
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


def test_wheel_holds_every_module_of_both_packages(wheel_names):
    for package, target in (("blockflow", "blockflow"), ("blocks", "blockflow_blocks")):
        sources = [p.relative_to(ROOT / package) for p in (ROOT / package).rglob("*.py")
                   if "__pycache__" not in p.parts]
        assert sources, f"no modules in {package}/"
        missing = [str(p) for p in sources if f"{target}/{p.as_posix()}" not in wheel_names]
        # A new subpackage (blockflow/gui/, ...) must be added to [tool.setuptools] packages.
        assert not missing, f"{package}/ modules missing from the wheel: {missing}"
    assert "blockflow_blocks/__init__.py" in wheel_names


def test_wheel_holds_the_sample_projects_and_assets(wheel_names):
    assert "blockflow/sample_projects/stable_softmax.bflow.json" in wheel_names
    for folder, pattern in (("sample_projects", "*.bflow.json"), ("assets", "*.json")):
        files = sorted(p.name for p in (ROOT / folder).glob(pattern))
        assert files, f"{folder}/ has no {pattern}"
        missing = [f for f in files if f"blockflow/{folder}/{f}" not in wheel_names]
        assert not missing, f"{folder}/ files missing from the wheel: {missing}"
    layers = sorted(p.name for p in (ROOT / "blocks" / "layers").glob("*.bflow.json"))
    assert "Dense.bflow.json" in layers
    missing = [f for f in layers if f"blockflow_blocks/layers/{f}" not in wheel_names]
    assert not missing, f"blocks/layers/ files missing from the wheel: {missing}"


def test_wheel_declares_the_entry_points(wheel):
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        entry_points = configparser.ConfigParser(delimiters=("=",))
        entry_points.optionxform = str
        entry_points.read_string(z.read(name).decode())
    assert dict(entry_points["blockflow.blocks"]) == PYPROJECT["project"]["entry-points"]["blockflow.blocks"]
    assert dict(entry_points["blockflow.layers"]) == PYPROJECT["project"]["entry-points"]["blockflow.layers"]
    assert entry_points["console_scripts"]["blockflow"] == "blockflow.console:main"


CHECK_INSTALLED = r"""
import json
from importlib import resources
import blockflow.registry, blockflow_blocks, blockflow.io.library
reg = blockflow.registry.Registry.from_entry_points()
try:
    sample = (resources.files("blockflow.sample_projects") / "stable_softmax.bflow.json").is_file()
except ModuleNotFoundError:
    sample = False
print(json.dumps({"blocks": reg.names(), "blockflow_blocks": blockflow_blocks.__file__,
                  "registry": blockflow.registry.__file__, "sample": sample,
                  "layers": [i.name for i in blockflow.io.library.default_library().layers()]}))
"""


def test_installed_wheel_finds_its_blocks_through_the_entry_point(wheel, tmp_path):
    target = tmp_path / "site"
    pip("install", "--no-deps", "--no-compile", "--target", str(target), str(wheel), cwd=tmp_path)
    assert (target / "bin" / "blockflow").is_file(), "console script not installed"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")])))
    # cwd is an empty folder, so the source tree is not on sys.path.
    work = tmp_path / "cwd"
    work.mkdir()
    result = subprocess.run([sys.executable, "-c", CHECK_INSTALLED], cwd=work, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"StopGradient", "Variable", "Placeholder"} <= set(found["blocks"])
    for module in ("blockflow_blocks", "registry"):
        assert Path(found[module]).is_relative_to(target), f"{module} came from {found[module]}, not the wheel"
    assert found["sample"], "stable_softmax.bflow.json is not readable through importlib.resources"
    assert {"Dense", "Conv2D", "BatchNormalization"} <= set(found["layers"]), found["layers"]
