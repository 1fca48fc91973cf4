"""The launcher: `blockflow render`, the no-display fallback, the editor, and the core CLI behind it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from blockflow.cli import EXIT_FILE, EXIT_OK, EXIT_USAGE
from blockflow.gui import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


def no_display_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


def blockflow(*args, cwd=None, env=None):
    """Run the installed console script (or the module when it is not installed) headless."""
    script = Path(sys.executable).with_name("blockflow")
    cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "blockflow.gui.app"]
    return subprocess.run(cmd + [str(a) for a in args], cwd=cwd, env=env or no_display_env(),
                          capture_output=True, text=True, timeout=120)


def assert_picture(path: Path, min_size=(400, 150)) -> QImage:
    image = QImage(str(path))
    assert not image.isNull(), f"{path} is not an image"
    assert image.width() >= min_size[0] and image.height() >= min_size[1]
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
    assert len(colours) > 20, "the picture is (nearly) blank"
    return image


def test_render_writes_png_and_svg_without_a_display(tmp_path):
    png = tmp_path / "softmax.png"
    proc = blockflow("render", SAMPLE, "-o", png, "--page", "by_hand")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert str(png) in proc.stdout
    assert_picture(png)
    svg = tmp_path / "softmax.svg"
    proc = blockflow("render", SAMPLE, "-o", svg)
    assert proc.returncode == EXIT_OK, proc.stderr
    text = svg.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "Softmax" in text


def test_editor_without_a_display_says_so_and_writes_the_picture(tmp_path):
    project = tmp_path / "mine.bflow.json"
    shutil.copy(SAMPLE, project)
    proc = blockflow(project, cwd=tmp_path)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "no display" in proc.stdout
    png = tmp_path / "mine.png"
    assert f"wrote {png} (run forward and backward, wires coloured by gradient)" in proc.stdout
    assert_picture(png)
    image = QImage(str(png))
    # the highlighted diagram: viridis-coloured wires and the legend, not only grey and blue
    from PySide6.QtGui import QColor
    purple = sum(1 for y in range(0, image.height(), 2) for x in range(0, image.width(), 2)
                 if QColor(image.pixel(x, y)).red() < 90 and QColor(image.pixel(x, y)).blue() > 60
                 and QColor(image.pixel(x, y)).green() < 60)
    assert purple > 50, purple
    # a project without a loss: the plain diagram, saying why
    plain = tmp_path / "plain.bflow.json"
    from diagrams import chain
    from blockflow.io.project_io import save_project
    save_project(chain(("x", "Placeholder", {"shape": [2]}, None), ("t", "Tanh", {}, {"x": "x"})), plain)
    proc = blockflow(plain, cwd=tmp_path)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "no gradients: " in proc.stdout and "marks no loss" in proc.stdout
    assert_picture(tmp_path / "plain.png", min_size=(150, 100))


def test_fallback_picture_goes_to_the_working_directory_when_the_folder_is_read_only(
        tmp_path, monkeypatch):
    project = tmp_path / "ro" / "net.bflow.json"
    project.parent.mkdir()
    monkeypatch.chdir(tmp_path)
    assert app._fallback_picture(project) == project.parent / "net.png"
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert app._fallback_picture(project) == tmp_path / "blockflow-net.png"


def test_render_errors_are_one_line_with_the_cli_exit_codes(tmp_path, capsys):
    assert app.main(["render", str(tmp_path / "missing.bflow.json"), "-o", str(tmp_path / "x.png")]) == EXIT_FILE
    err = capsys.readouterr().err
    assert "missing.bflow.json" in err and "Traceback" not in err and err.count("\n") == 1
    assert app.main(["render", str(SAMPLE), "-o", str(tmp_path / "x.jpg")]) == EXIT_USAGE
    assert ".png or .svg" in capsys.readouterr().err
    assert app.main(["render", str(SAMPLE), "-o", str(tmp_path / "x.png"), "--page", "nope"]) == EXIT_USAGE
    assert "nope" in capsys.readouterr().err


def test_help_lists_render_and_the_core_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        app.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for word in ("render", "run", "check", "blocks", "opens the editor", "exit codes"):
        assert word in out


def test_core_commands_are_delegated_to_the_cli(capsys):
    assert app.main(["check", str(SAMPLE)]) == EXIT_OK
    assert "page 'stable_softmax'" in capsys.readouterr().out
    assert app.main(["blocks", "--json"]) == EXIT_OK
    assert '"StopGradient"' in capsys.readouterr().out
    # every core command reaches the core command line through the `blockflow` console script
    assert set(app._CLI_COMMANDS) >= {"run", "check", "train", "blocks"}
    assert app.main(["train", str(SAMPLE.parent / "linear_regression.bflow.json"), "--steps", "5", "--quiet"]) == EXIT_OK
    assert "trained page" in capsys.readouterr().out


def test_core_cli_module_still_avoids_qt():
    code = "import sys, blockflow.cli; sys.exit('PySide6' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], env=no_display_env()).returncode == 0


def test_editor_opens_the_default_sample_as_an_untitled_copy(qtbot, monkeypatch):
    from PySide6.QtCore import QStandardPaths
    from PySide6.QtWidgets import QApplication

    QStandardPaths.setTestModeEnabled(True)
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    assert app.run_editor(None, exec_loop=False) == EXIT_OK
    from blockflow.gui.main_window import MainWindow

    (window,) = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
    qtbot.addWidget(window)
    assert window.document.path is None and window.document.current_page == "stable_softmax"
    assert len(window.document.page().nodes) == 8
    assert "Stable softmax" in window.windowTitle()
    from blockflow.gui.canvas.readable import READABLE_ZOOM

    assert window.view.zoom() >= READABLE_ZOOM - 1e-9         # its text can be read (issue 16)
    window.close()
