"""The editor names the X11 libraries it lacks instead of letting Qt abort (issue 16)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from blockflow.gui.common import x11libs

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("env, expected", [
    ({"DISPLAY": ":0"}, True),
    ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"}, True),
    ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, False),
    ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, False),
    ({}, False),
    ({"QT_QPA_PLATFORM": "xcb:dpi=96"}, True),
])
def test_which_environments_open_windows_through_x11(env, expected):
    assert x11libs.uses_xcb(env) is expected or not sys.platform.startswith("linux")


def test_the_missing_libraries_are_named_by_their_debian_packages(monkeypatch):
    monkeypatch.setattr(x11libs, "_loads", lambda soname: soname not in ("libxcb-cursor.so.0",
                                                                         "libxcb-xkb.so.1"))
    assert x11libs.missing_xcb_packages() == ["libxcb-cursor0", "libxcb-xkb1"]
    text = x11libs.missing_xcb_message(["libxcb-cursor0", "libxcb-xkb1"])
    assert "apt-get install -y --no-install-recommends libxcb-cursor0 libxcb-xkb1" in text


def test_the_list_is_what_dev_sh_installs():
    script = (ROOT / "dev.sh").read_text()
    start = script.index("XCB_PACKAGES=(") + len("XCB_PACKAGES=(")
    listed = script[start:script.index(")", start)].split()
    assert listed == [package for _soname, package in x11libs.XCB_LIBRARIES]


def test_this_machine_has_them_all():
    # dev.sh installed them (both jobs do): the check must not cry wolf where the editor starts.
    if not sys.platform.startswith("linux"):
        pytest.skip("the xcb plugin is Linux's")
    assert x11libs.missing_xcb_packages() == []


def test_the_editor_says_which_packages_to_install_instead_of_aborting(tmp_path):
    code = (
        "import sys\n"
        "from blockflow.gui.common import x11libs\n"
        "x11libs._loads = lambda soname: soname != 'libxcb-cursor.so.0'\n"
        "from blockflow.gui.app import main\n"
        "sys.exit(main([]))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    env.update(DISPLAY=":97", HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert "libxcb-cursor0" in done.stderr and "apt-get install" in done.stderr
    assert "Traceback" not in done.stderr and "Aborted" not in done.stderr
