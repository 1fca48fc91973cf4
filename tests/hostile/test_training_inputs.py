"""Training's inputs from the command line and the project, as an attacker or a careless script
would give them: the file `train --save` is to write. Each case runs ``blockflow`` in a child process and checks the exit code, the
message (where and what, no traceback) and that nothing else changed on disk.
"""
from __future__ import annotations

import os
import socket
import stat

import pytest

from hostile_kit import changed_paths, snapshot
from test_cli_edges import cli, cli_each, regression

from blockflow.ownfiles import name_problem


# ------------------------------------------------------------------------ what --save may name


def _special_files(folder):
    """A named pipe, a socket and a link to the pipe in ``folder``: names that hold no file."""
    os.mkfifo(folder / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "sock"))
    (folder / "to-pipe").symlink_to(folder / "pipe")
    return sock


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes and Unix sockets")
def test_train_save_refuses_a_device_a_pipe_or_a_socket_before_training(tmp_path):
    """A save puts a new file in the name's place: before, `--save /dev/null` run as root put a
    regular file where the device was (and kept the device as /dev/null.bak), and a named pipe
    or a socket was replaced the same way after the whole training had run."""
    src = regression(tmp_path / "r.bflow.json")
    sock = _special_files(tmp_path)
    try:
        before = snapshot(tmp_path)
        cases = [("pipe", "it is a named pipe, not a file"), ("to-pipe", "it is a named pipe, not a file"),
                 ("sock", "it is a socket, not a file")]
        runs = cli_each([("train", src, "--steps", "3", "--save", tmp_path / name) for name, _ in cases], tmp_path)
        for (name, words), (code, out, err) in zip(cases, runs):
            assert code == 2 and f"--save {tmp_path / name}: {words}" in err, (name, out, err)
            assert "step " not in err and "Traceback" not in err, (name, out, err)     # refused before training
        assert changed_paths(before, snapshot(tmp_path)) == set()
        assert stat.S_ISFIFO(os.lstat(tmp_path / "pipe").st_mode)
        assert stat.S_ISSOCK(os.lstat(tmp_path / "sock").st_mode)
    finally:
        sock.close()


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="a character device to name")
def test_a_device_cannot_name_a_file_to_replace_but_may_be_written_into():
    """Never saved to here (a failure would replace /dev/null when the tests run as root): the
    check every save and export makes first is asked directly."""
    assert name_problem("/dev/null") == ("it is a character device, not a file: writing would replace it "
                                         "with one (give a file name)")
    assert name_problem("/dev/null", replaces=False) == ""     # blocks/layers --output write into it


def test_blocks_markdown_may_still_be_written_into_a_device(tmp_path):
    r = cli("blocks", "--markdown", "--output", "/dev/null")
    assert r.returncode == 0 and "wrote /dev/null" in r.stdout, r.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
