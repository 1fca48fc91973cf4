"""Training's inputs from the command line and the project, as an attacker or a careless script
would give them: the file `train --save` is to write, the optimizer settings of `--set` and the
other options, and files named to be read that are no files (a device never ends). Each case runs ``blockflow`` in a child process and checks the exit code, the
message (where and what, no traceback) and that nothing else changed on disk.
"""
from __future__ import annotations

import os
import socket
import stat
import threading

import pytest

from hostile_kit import changed_paths, run_cli, run_python, snapshot
from test_cli_edges import cli, cli_each, data_project, regression

from blockflow.io.project_io import load_project
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


def test_train_save_into_a_folder_that_refuses_files_is_said_before_training(tmp_path):
    """A link to a folder that is gone (as root the one folder that refuses everyone; /proc,
    read-only mounts and other users' folders alike): before, the whole training ran and then
    'cannot save: No such file or directory' lost it (exit 3 after the last step)."""
    src = regression(tmp_path / "r.bflow.json")
    (tmp_path / "out.bflow.json").symlink_to(tmp_path / "gone" / "out.bflow.json")
    cases = [(tmp_path / "out.bflow.json", f"cannot write in the folder {tmp_path / 'gone'}: No such file or directory")]
    if os.path.isdir("/proc/self"):
        cases.append(("/proc/out.bflow.json", "cannot write in the folder /proc: "))
    before = snapshot(tmp_path)
    runs = cli_each([("train", src, "--steps", "50", "--save", out) for out, _ in cases], tmp_path)
    for (out, words), (code, stdout, stderr) in zip(cases, runs):
        assert code == 3 and f"--save {out}: {words}" in stderr and "nothing was done" in stderr, (out, stdout, stderr)
        assert "step " not in stderr, stderr        # refused before the first step
    assert changed_paths(before, snapshot(tmp_path)) == set()     # the probe's temporary is gone


def test_train_save_over_a_data_file_the_project_reads_is_refused_before_training(tmp_path):
    """Before: the training ran, the project took the place of its own data/train.csv (the data
    left only in train.csv.bak) and the saved project read itself as its table."""
    src = data_project(tmp_path)
    (tmp_path / "alias.csv").hardlink_to(tmp_path / "data" / "train.csv")
    before = snapshot(tmp_path)
    outs = [tmp_path / "data" / "train.csv", tmp_path / "data" / ".." / "data" / "train.csv", tmp_path / "alias.csv"]
    runs = cli_each([("train", src, "--steps", "3", "--save", out) for out in outs], tmp_path)
    for out, (code, stdout, stderr) in zip(outs, runs):
        assert code == 2 and f"--save {out}: it is the data file 'data/train.csv' the project reads; give another " \
            "name (nothing was done)" in stderr and "step " not in stderr, (out, stdout, stderr)
    assert changed_paths(before, snapshot(tmp_path)) == set()


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


# ------------------------------------------------------------------------ settings on the command line


BAD_OPTIONS = [
    # an integer of more digits than Python converts: an internal error (exit 5) before
    (("--set", "lr=" + "9" * 5000), "--set 'lr=" + "9" * 37 + "... (5,003 characters)': "
                                    "the value must be a number (of at most 4,300 digits) or true/false"),
    (("--set", "lr=x"), "--set 'lr=x': the value must be a number (of at most 4,300 digits) or true/false"),
    # said by the option's name, before the project is read (before: "eval_every must be >= 0")
    (("--eval-every", "-1"), "argument --eval-every: -1 is out of range: a whole number from 0 to 10,000,000"),
]


def test_bad_training_options_are_usage_errors_that_name_the_option(tmp_path):
    path = regression(tmp_path / "r.bflow.json")
    runs = cli_each([("train", path, "--steps", "2", "--optimizer", "sgd", *args) for args, _ in BAD_OPTIONS],
                    tmp_path)
    for (args, words), (code, out, err) in zip(BAD_OPTIONS, runs):
        assert code == 2 and words in err and "Traceback" not in err and "internal error" not in err, \
            (args[:1], out, err[-500:])
        assert len(err) < 2000, err[-500:]      # the huge value is not echoed whole


# ------------------------------------------------------------------------ inline values nested deeply


def test_inline_json_nested_past_the_decoders_recursion_limit_is_a_usage_error(tmp_path):
    """json's decoder recurses once per level: 5,000 levels (10 KB; a few thousand pass Python's
    recursion limit) was an internal error (RecursionError, exit 5)."""
    path = regression(tmp_path / "r.bflow.json")
    deep = "[" * 5_000 + "]" * 5_000
    runs = cli_each([("run", path, "--feed", f"x={deep}"),
                     ("run", path, "--feed", "x=[1,2,3]", "--feed", "y=[1,2,3]", "--grad", "loss", "--grad-seed", deep),
                     ("train", path, "--steps", "2", "--optimizer", "sgd", "--set", f"lr={deep}")], tmp_path)
    wants = ["--feed x: '" + "[" * 40 + "... (10,000 characters)' is nested too deeply to be an array",
             "--grad-seed seed: '" + "[" * 40 + "... (10,000 characters)' is nested too deeply to be an array",
             "--set 'lr=" + "[" * 37 + "... (10,003 characters)': the value must be a number"]
    for words, (code, out, err) in zip(wants, runs):
        assert code == 2 and words in err and "internal error" not in err, (words, out, err[-500:])
        assert len(err) < 2000, err[-500:]


# ------------------------------------------------------------------------ files to read that are devices

CAP = 1024 ** 3     # a device read to the project-file limit (2 GiB) went past this


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="a device that never ends")
def test_a_project_or_a_csv_feed_that_is_a_device_is_refused_not_read_until_memory_runs_out(tmp_path):
    """/dev/zero has no size and no end: a project was read up to 2 GiB (twice that in memory)
    and a CSV feed was one endless line for the csv module, each an internal error (MemoryError,
    exit 5) under the cap."""
    path = regression(tmp_path / "r.bflow.json")
    (tmp_path / "zero.csv").symlink_to("/dev/zero")
    r = run_cli("check", "/dev/zero", cap_bytes=CAP)
    r.assert_clean_message()
    assert r.returncode == 3 and "/dev/zero: cannot read the file: it is a character device, not a file" in r.stderr, \
        r.output
    r = run_cli("run", path, "--feed", f"x={tmp_path / 'zero.csv'}", "--feed", "y=[1,2,3]", cap_bytes=CAP)
    r.assert_clean_message()
    assert r.returncode == 3 and f"--feed x: cannot read {tmp_path / 'zero.csv'}: it is a character device, " \
        "not a file" in r.stderr, r.output


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_csv_feed_from_a_named_pipe_is_refused_not_waited_on(tmp_path):
    """A table is read twice, its size first: a named pipe's writer ended the first read, and the
    second open waited for another writer, for ever."""
    path = regression(tmp_path / "r.bflow.json")
    os.mkfifo(tmp_path / "x.csv")
    # a producer writing the table once, as soon as a reader opens the pipe
    feeder = threading.Thread(target=lambda: _write_once(tmp_path / "x.csv", b"1\n2\n3\n"), daemon=True)
    feeder.start()
    r = run_cli("run", path, "--feed", f"x={tmp_path / 'x.csv'}", "--feed", "y=[1,2,3]", timeout=30)
    r.assert_clean_message()
    assert r.returncode == 3 and f"--feed x: cannot read {tmp_path / 'x.csv'}: it is a named pipe, not a file " \
        "(a .csv feed is read twice, its size first: save the table to a file)" in r.stderr, r.output


def _write_once(fifo, data: bytes) -> None:
    """Write ``data`` into ``fifo`` when a reader opens it; give up after a while if none does."""
    for _ in range(300):
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:         # no reader yet
            threading.Event().wait(0.1)
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return


def test_a_project_read_from_a_pipe_still_loads(tmp_path):
    """The shell's <(...) names a pipe: it has no size either, but its writer ends it."""
    text = regression(tmp_path / "r.bflow.json").read_bytes()
    read_end, write_end = os.pipe()

    def write():
        with os.fdopen(write_end, "wb") as f:
            f.write(text)
    writer = threading.Thread(target=write)
    writer.start()
    try:
        project = load_project(f"/dev/fd/{read_end}")
    finally:
        writer.join()
        os.close(read_end)
    assert project.pages[0].name == "main"


def test_the_editors_csv_feed_reader_reads_a_small_table_only(tmp_path):
    """The inspector's "Load from file..." read a .csv whole, with its lines as strings: a 16 MB
    column took 1 GB and 7 s on the UI thread, a larger one or /dev/zero ran out of memory (a
    MemoryError out of a Qt slot). Now at most 16 MiB and 1,000,000 lines, said before parsing."""
    (tmp_path / "rows.csv").write_text("1\r" * 1_000_001)         # line ends splitlines knows
    (tmp_path / "big.csv").write_text(("1," * 1023 + "1\n") * 8200)   # 16.8 MB, 8,200 lines
    (tmp_path / "ok.csv").write_text("x\n" + "2.5\n" * 999_999)
    links = ""
    if os.path.exists("/dev/zero"):
        (tmp_path / "zero.csv").symlink_to("/dev/zero")
        links = "'zero.csv', "
    r = run_python(f"""
        import os, time
        os.chdir({str(tmp_path)!r})
        from blockflow.feeds import read_feed_file
        for name in ['rows.csv', 'big.csv', {links}'ok.csv']:
            t = time.perf_counter()
            try:
                a = read_feed_file(name, 'float32', [-1])
                print(name, 'read', a.shape, a.dtype, a[0])
            except ValueError as exc:
                print(name, 'refused', exc)
            print(name, 'seconds', round(time.perf_counter() - t, 2))
    """, cap_bytes=CAP, timeout=120)
    r.assert_clean_message()
    lines = dict((l.split(" ", 1)[0] + " " + l.split(" ", 2)[1], l) for l in r.stdout.splitlines())
    assert "the table has 1,000,001 lines, more than the 1,000,000 the editor reads" in lines["rows.csv refused"], r.output
    assert "the table is more than 16 MiB, the most the editor reads from a .csv: save it as .npy" \
        in lines["big.csv refused"], r.output
    if links:
        assert lines["zero.csv refused"] == "zero.csv refused it is not a regular file", r.output
    assert lines["ok.csv read"] == "ok.csv read (999999,) float32 2.5", r.output
    assert r.peak_rss < 400 * 1024 ** 2, r.peak_rss


# ------------------------------------------------------------------------ TrainConfig from a script


@pytest.mark.parametrize("setting, value", [("seed", 1.5), ("seed", "7"), ("steps", True), ("eval_every", "x"),
                                            ("eval_every", 2.5), ("seed", None)])
def test_train_config_wants_whole_numbers_and_says_which(tmp_path, setting, value):
    """Before: a seed of 1.5 was a TypeError from numpy's SeedSequence at the first draw, an
    eval_every of "x" a TypeError at its comparison, and steps=True trained one step."""
    from blockflow.run.training import TrainConfig, Trainer, training_program

    program = training_program(load_project(regression(tmp_path / "r.bflow.json")))
    with pytest.raises(ValueError, match=f"^{setting} must be a whole number, got {value!r}$".replace("(", r"\(")):
        Trainer(program, TrainConfig(**{"steps": 2, "optimizer": "sgd", setting: value}))
    trainer = Trainer(program, TrainConfig(steps=2, optimizer="sgd", seed=-1))   # any whole seed, as before
    assert len(trainer.train().steps) == 2


# ------------------------------------------------------------------------ decay rates


DECAY_CASES = [
    # Adam divided 0 by 0 at step 0 and blamed the learning rate
    (("--optimizer", "adam", "--set", "beta1=1"), "adam beta1 must be below 1 (a decay rate), found 1"),
    # the average of squares turned negative: NaN at step 0, the learning rate blamed again
    (("--optimizer", "adam", "--set", "beta2=1.5"), "adam beta2 must be below 1 (a decay rate), found 1.5"),
    (("--optimizer", "rmsprop", "--set", "rho=1000000"), "rmsprop rho must be below 1 (a decay rate), found 1,000,000"),
    # Adam's steps changed sign and size: trained, exit 0, numbers of no meaning
    (("--optimizer", "adam", "--set", "beta1=2"), "adam beta1 must be below 1 (a decay rate), found 2"),
]


def test_a_decay_rate_of_one_or_more_is_a_usage_error(tmp_path):
    path = regression(tmp_path / "r.bflow.json")
    runs = cli_each([("train", path, "--steps", "2", *args) for args, _ in DECAY_CASES], tmp_path)
    for (args, words), (code, out, err) in zip(DECAY_CASES, runs):
        assert code == 2 and words in err and "step " not in err, (args, out, err)


def test_a_recommended_decay_rate_of_one_is_a_problem_with_its_place(tmp_path):
    from blockflow.run.settings import recommended_settings

    path = regression(tmp_path / "r.bflow.json")
    project = load_project(path)
    project.metadata["training"] = {"main": {"optimizer": "adam", "beta1": 1, "beta2": 0.999, "steps": 2}}
    problems = []
    assert recommended_settings(project, "main", problems) == {"optimizer": "adam", "steps": 2,
                                                              "hyper": {"beta2": 0.999}}
    assert [str(p) for p in problems] == ["metadata.training.main.beta1: must be below 1 (a decay rate), found 1"]


# ------------------------------------------------------------------------ a table of one endless row


def test_a_csv_line_longer_than_a_table_may_hold_is_refused_before_its_row_is_made(tmp_path):
    """The csv module makes a line's row whole, a string per cell: a 120 MB --feed table of one
    row took 28 s and ran out of a 2 GB cap (MemoryError, exit 5); CsvDataset reads tables the same
    way. Now a line is read no further than MAX_TABLE_LINE_CHARS."""
    from blockflow.datafiles import MAX_TABLE_LINE_CHARS, DataFileError, read_number_table

    path = regression(tmp_path / "r.bflow.json")
    wide = tmp_path / "wide.csv"
    wide.write_text("x,y\n1,2\n" + "1," * (MAX_TABLE_LINE_CHARS // 2) + "1\n")     # its line 3 is too long
    with pytest.raises(DataFileError, match=r"^'wide.csv' line 3: more than 4,194,304 characters, the most a "
                                            r"line of a table may hold \(save a wide table as \.npy\)$"):
        read_number_table("wide.csv", wide, header="required")
    (tmp_path / "fine.csv").write_text("1," * (MAX_TABLE_LINE_CHARS // 2 - 1) + "1\n")  # as long as allowed
    assert read_number_table("fine.csv", tmp_path / "fine.csv")[1].shape == (1, MAX_TABLE_LINE_CHARS // 2)
    wide.write_text("1," * (20 * 1024 * 1024) + "1\n")                                   # 40 MB of one row
    r = run_cli("run", path, "--feed", f"x={wide}", "--feed", "y=[1,2,3]", cap_bytes=CAP, timeout=120)
    r.assert_clean_message()
    assert r.returncode == 3 and f"--feed x: '{wide}' line 1: more than 4,194,304 characters" in r.stderr, r.output
    assert r.peak_rss < 200 * 1024 ** 2, r.peak_rss


# ------------------------------------------------------------------------ many unknown settings


def test_unknown_recommended_settings_are_named_eight_at_a_time(tmp_path):
    """Each unknown key was a problem of its own: a 2.7 MB file of 200,000 printed 43 MB of
    warnings from `blockflow train` and made as many rows in the editor's Problems and Train
    panels. A key's place is cut at 40 characters."""
    from blockflow.run.settings import recommended_settings

    path = regression(tmp_path / "r.bflow.json")
    project = load_project(path)
    entry = {"steps": 2, "optimizer": "sgd", "lr": 0.1, "x" * 100_000: 1, **{f"k{i}": 1 for i in range(200_000)}}
    project.metadata["training"] = {"main": entry}
    problems = []
    assert recommended_settings(project, "main", problems) == {"optimizer": "sgd", "steps": 2, "hyper": {"lr": 0.1}}
    assert len(problems) == 9
    assert str(problems[0]).startswith('metadata.training.main["' + "x" * 40 + '..."]: unknown setting (settings: ')
    assert str(problems[8]) == ("metadata.training.main.k7: unknown setting, and 199,992 more after it "
                                "(the first 8 are named)")
    from blockflow.io.project_io import save_project
    save_project(project, path, backup=False)
    r = cli("train", path, "-q")
    assert r.returncode == 0 and len(r.stderr) < 3000, (r.returncode, len(r.stderr), r.stderr[-500:])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_the_editors_feed_reader_does_not_wait_on_a_named_pipe(tmp_path):
    """Load from file... on a named pipe no one writes to hung the editor's UI thread for good."""
    os.mkfifo(tmp_path / "pipe.npy")
    os.mkfifo(tmp_path / "pipe.csv")
    r = run_python(f"""
        from blockflow.feeds import read_feed_file
        for name in ('pipe.npy', 'pipe.csv'):
            try:
                read_feed_file({str(tmp_path)!r} + '/' + name, 'float32', [-1])
            except ValueError as exc:
                print(name, exc)
    """, timeout=20)
    assert r.stdout.splitlines() == ["pipe.npy it is not a regular file", "pipe.csv it is not a regular file"], r.output


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_the_editor_does_not_open_a_named_pipe_as_a_project(tmp_path):
    """File > Open on a named pipe no one writes to hung the editor's UI thread for good."""
    os.mkfifo(tmp_path / "pipe.bflow.json")
    r = run_python(f"""
        from PySide6.QtWidgets import QApplication
        app = QApplication([])
        from blockflow.errors import ProjectFileError
        from blockflow.gui.document.document import Document
        doc = Document()
        try:
            doc.open({str(tmp_path / "pipe.bflow.json")!r})
        except ProjectFileError as exc:
            print(exc)
        print(doc.path)
    """, timeout=60, env={"QT_QPA_PLATFORM": "offscreen"})
    assert r.stdout.splitlines() == [f"{tmp_path / 'pipe.bflow.json'}: cannot open it: it is not a regular file",
                                     "None"], r.output


def test_an_inline_feed_of_integers_past_int64_is_taken_as_numbers(tmp_path):
    """numpy keeps integers past int64 as Python objects: `--feed x=[100000000000000000000000]`
    was refused as 'expected numbers'. Now a float Placeholder takes them, an integer one names
    the value that does not fit it, and one past any float is named as that."""
    path = regression(tmp_path / "r.bflow.json")
    big = "1" + "0" * 19        # past int64; its square still fits float32
    runs = cli_each([("run", path, "--feed", f"x=[{big},1,2]", "--feed", "y=[1,2,3]", "--fetch", "x"),
                     ("run", path, "--feed", f"x=[1,{'9' * 400}]", "--feed", "y=[1,2,3]")], tmp_path)
    (code, out, err), (code2, _, err2) = runs
    assert code == 0 and "main/x:output  float32[3]  = [1.e+19, 1.e+00, 2.e+00]" in out, (out, err)
    assert code2 == 2 and "--feed x: '[1," + "9" * 37 + "... (404 characters)' holds an " \
        "integer larger than any float (about 1.8e308)" in err2, err2


def test_an_export_over_the_project_itself_is_refused(tmp_path):
    """An export replaces the file it names and keeps no backup: `export onnx p.bflow.json -o
    p.bflow.json` put the model in the project's place, and the project was gone."""
    path = regression(tmp_path / "p.bflow.json")
    (tmp_path / "hard.bflow.json").hardlink_to(path)
    (tmp_path / "sub").mkdir()
    before = snapshot(tmp_path)
    cases = [("onnx", path, "p.onnx"), ("torch", tmp_path / "sub" / ".." / "p.bflow.json", "p.py"),
             ("onnx", tmp_path / "hard.bflow.json", "hard.onnx")]
    runs = cli_each([("export", fmt, path, "-o", out) for fmt, out, _ in cases], tmp_path)
    for (fmt, out, name), (code, stdout, stderr) in zip(cases, runs):
        assert code == 2 and f"-o {out} is the project itself: name a new file (e.g. {name}); nothing was " \
            "written" in stderr, (fmt, out, stdout, stderr)
    assert changed_paths(before, snapshot(tmp_path)) == set()


def test_check_grad_compiles_a_page_with_its_data_files(tmp_path):
    """check --grad (and the editor's Explain panel) compiled the page again without the
    project's folder: a page reading a data file did not compile, and was said to have 'no
    compiled node' of its loss (exit 2)."""
    path = data_project(tmp_path)
    r = cli("check", path, "--grad")
    assert r.returncode == 0 and "    W: analytic " in r.stdout and " ok" in r.stdout, r.output
    assert "no compiled node" not in r.output


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_a_csv_line_of_exactly_the_most_characters_is_read_whatever_its_line_end(tmp_path, monkeypatch, end):
    """The limit counts a line's characters, not its line end: before, a line of exactly
    MAX_TABLE_LINE_CHARS characters was refused as 'more than' that when it ended in a newline
    (not at the end of the file), and one a character shorter when it ended in CRLF."""
    from blockflow import datafiles

    monkeypatch.setattr(datafiles, "MAX_TABLE_LINE_CHARS", 9)
    for last in (end, ""):                                                           # 9 characters a line
        (tmp_path / "t.csv").write_bytes(f"1,2,3,4,5{end}1,2,3,4,5{last}".encode())
        assert datafiles.read_number_table("t.csv", tmp_path / "t.csv")[1].shape == (2, 5)
    (tmp_path / "t.csv").write_bytes(f"1,2,3,4,5{end}1,2,3,4,56{end}".encode())      # line 2: 10
    with pytest.raises(datafiles.DataFileError, match=r"^'t.csv' line 2: more than 9 characters"):
        datafiles.read_number_table("t.csv", tmp_path / "t.csv")


def test_export_o_a_symbolic_link_into_a_folder_that_is_gone_replaces_the_link(tmp_path):
    """An export replaces a link named by -o, never writing through it (docs/export.md): so the
    folder that must take a new file is the link's own. Before, the probe followed the link:
    'cannot write in the folder .../gone' (exit 3), the export refused. A link to a device is
    still refused (-o /dev/stdout as root would replace the system's link; the user meant the
    device): 'it is a character device' (exit 2), the link left as it was."""
    path = regression(tmp_path / "p.bflow.json")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "gone" / "dangling.py")
    r = cli("export", "torch", path, "-o", tmp_path / "dangling.py")
    assert r.returncode == 0, r.output
    assert (tmp_path / "dangling.py").is_file() and not (tmp_path / "dangling.py").is_symlink()
    assert not (tmp_path / "gone").exists()
    (tmp_path / "null.py").symlink_to(os.devnull)
    r = cli("export", "torch", path, "-o", tmp_path / "null.py")
    assert r.returncode == 2 and "it is a character device, not a file" in r.stderr, r.output
    assert os.readlink(tmp_path / "null.py") == os.devnull and stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_render_o_writes_into_a_named_pipe_as_it_did(tmp_path):
    """render -o writes the picture into what the name holds (QImage.save, QSvgGenerator: the
    file opened and written, never replaced), as the Markdown references do: so a named pipe
    someone reads is a place to send it, and there is nothing it could replace. Since hostile26
    it was refused 'it is a named pipe, not a file: writing would replace it with one' (exit 2)."""
    path = regression(tmp_path / "p.bflow.json")
    os.mkfifo(tmp_path / "out.png")
    got = []
    reader = threading.Thread(target=lambda: got.append((tmp_path / "out.png").read_bytes()), daemon=True)
    reader.start()
    try:
        r = run_cli("render", path, "-o", tmp_path / "out.png", timeout=120)
    finally:
        if reader.is_alive():     # never opened for writing: let the reader see the end
            os.close(os.open(tmp_path / "out.png", os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    assert got and got[0].startswith(b"\x89PNG"), got
    assert stat.S_ISFIFO(os.lstat(tmp_path / "out.png").st_mode)


def test_a_long_page_name_is_named_whole_in_a_settings_place(tmp_path):
    """Only a key (a name the file may make 100 KB long, one of thousands) is cut in a setting's
    place: a page's name is the user's, printed whole everywhere else. Since hostile26 a page of
    more than 40 characters was cut too, so two such pages' problems looked alike."""
    from blockflow.run.settings import recommended_settings

    project = load_project(regression(tmp_path / "r.bflow.json"))
    long = "regression_with_adam_for_the_sensor_data_" + "v2"     # 43 characters
    project.rename_page("main", long)
    project.metadata["training"] = {long: {"optimizer": "adam", "beta1": 1, "y" * 50: 1}}
    problems = []
    recommended_settings(project, long, problems)
    assert [str(p) for p in problems] == [
        f"metadata.training.{long}.beta1: must be below 1 (a decay rate), found 1",
        f'metadata.training.{long}["' + "y" * 40 + '..."]: unknown setting (settings: ' + str(problems[1]).split(
            "(settings: ", 1)[1]], problems


def test_the_folder_probe_leaves_no_temporary_when_closing_it_fails(tmp_path, monkeypatch):
    """folder_problem makes an empty temporary and removes it: a close that fails (EIO on a
    network file system) left it behind, and the OSError was an internal error (exit 5)."""
    from blockflow import ownfiles

    def failing_close(fd):
        real_close(fd)
        raise OSError(5, "Input/output error")

    real_close = os.close
    monkeypatch.setattr(ownfiles.os, "close", failing_close)
    try:
        assert ownfiles.folder_problem(tmp_path / "out.bflow.json") == ""
    finally:
        monkeypatch.undo()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("setting", ["beta1=0.99999999", "beta2=0.99999999", "rho=0.99999999"])
def test_a_decay_rate_that_is_1_in_the_variables_dtype_is_refused(tmp_path, setting):
    """A decay rate below 1 may still be 1 in float32, where the update computes: beta1
    0.99999999 was Adam's 0/0, a NaN at step 0 blamed on the learning rate (exit 4), beta2 and
    rho 0.99999999 trained with the rate 1 (the summary said 'beta2 1'). Now a usage error naming
    the Variable's dtype, before the first step; 0.9999 is still taken."""
    path = regression(tmp_path / "r.bflow.json")
    key = setting.split("=")[0]
    optimizer = "rmsprop" if key == "rho" else "adam"
    r = cli("train", path, "--steps", "2", "--optimizer", optimizer, "--set", setting)
    assert r.returncode == 2 and f"{optimizer} {key} 0.99999999 is 1 in float32, the dtype of Variable main/W: " \
        "a decay rate must be below 1" in r.stderr, r.output
    assert "step 0" not in r.output
    r = cli("train", path, "--steps", "2", "--optimizer", optimizer, "--set", f"{key}=0.9999")
    assert r.returncode == 0, r.output


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="/proc/self/fd")
def test_export_o_a_link_to_a_descriptor_is_refused_whatever_the_output_is(tmp_path):
    """/dev/stdout is a link to /proc/self/fd/1: when the output goes to a file, the device check
    sees a regular file, and the export, which replaces the link named (never writing through
    it), put the model in the link's place: 'export -o /dev/stdout > log' run as root replaced the
    system's /dev/stdout. A link into /proc or /dev/fd names a descriptor, not a file: refused
    (exit 2), the link left. Here a link of the test's own stands for /dev/stdout."""
    import subprocess
    import sys

    path = regression(tmp_path / "p.bflow.json")
    (tmp_path / "stdout.py").symlink_to("/proc/self/fd/1")
    with open(tmp_path / "log", "wb") as log:           # the output a file, as with '> log'
        r = subprocess.run([sys.executable, "-m", "blockflow", "export", "torch", str(path), "-o",
                            str(tmp_path / "stdout.py")], stdout=log, stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 2 and f"-o {tmp_path / 'stdout.py'}: it is a link to /proc/self/fd/1, a descriptor " \
        "of this process, not a file" in r.stderr, r.stderr
    assert os.readlink(tmp_path / "stdout.py") == "/proc/self/fd/1" and not (tmp_path / "stdout.pt").exists()
