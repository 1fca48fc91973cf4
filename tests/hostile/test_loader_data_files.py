"""Data files a project names (.npy, .npz, .csv): sizes are judged from what a file declares
before anything of that size exists, and never trusted further (docs/limits.md, "Data files").

The hostile archives are written here by hand (a zip directory can say anything): deflated
members are made of one deflate block of zeros repeated, so a 1 GB member takes a millisecond
to write and about a megabyte on disk.
"""
from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npformat

from blockflow import datafiles, spec
from blockflow.datafiles import DataFileError, DataFiles
from blockflow.project import Project
from blockflow.io.project_io import save_project
from call_counts import Calls
from hostile_kit import changed_paths, run_cli, run_python, snapshot

GB = 10 ** 9


def npy_header(shape, dtype="<f8") -> bytes:
    out = io.BytesIO()
    npformat.write_array_header_1_0(out, {"descr": npformat.dtype_to_descr(np.dtype(dtype)),
                                          "fortran_order": False, "shape": tuple(shape)})
    return out.getvalue()


def raw_npy_header(text: str, version: int = 1) -> bytes:
    """An .npy header with any text in it."""
    body = text.encode("latin1")
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(body)) + body


def deflated_zeros(head: bytes, zeros: int, chunk: int = 1 << 20):
    """(deflate stream, crc, size) of ``head`` followed by ``zeros`` zero bytes, made quickly:
    after a full flush, compressing the same chunk again gives the same bytes."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(bytes(chunk)) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(bytes(chunk)) + c.flush(zlib.Z_FULL_FLUSH)
    assert block == again
    n, rest = divmod(zeros, chunk)
    crc, zero = zlib.crc32(head), bytes(chunk)
    for _ in range(n):   # chained: no buffer of the whole size
        crc = zlib.crc32(zero, crc)
    tail = c.compress(bytes(rest)) + c.flush()
    return first + block * n + tail, zlib.crc32(bytes(rest), crc), len(head) + zeros


def write_zip(path, members, *, entries=None) -> None:
    """A zip file of ``members``: (name, method, data, crc, size) with ``size`` the uncompressed
    size its directory declares (true or not); ``entries`` overrides the count its end record
    gives."""
    out = io.BytesIO()
    central = []
    for name, method, data, crc, size in members:
        offset = out.tell()
        raw = name.encode()
        out.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc,
                              len(data), size, len(raw), 0) + raw + data)
        central.append(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc,
                                   len(data), size, len(raw), 0, 0, 0, 0, 0, offset) + raw)
    start = out.tell()
    out.write(b"".join(central))
    size = out.tell() - start
    n = len(members) if entries is None else entries
    if n > 0xFFFF:   # zip64 end records carry the true count
        z64 = out.tell()
        out.write(struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, size, start))
        out.write(struct.pack("<4sLQL", b"PK\x06\x07", 0, z64, 1))
    out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, min(n, 0xFFFF), min(n, 0xFFFF), size,
                          start, 0))
    Path(path).write_bytes(out.getvalue())


def npz_bomb(path, members=10, each=GB) -> None:
    """``members`` arrays of float64 zeros, ``each`` bytes each, all deflated (~1 MB a GB)."""
    head = npy_header((each // 8,))
    data, crc, size = deflated_zeros(head, each)
    write_zip(path, [(f"a{i}.npy", 8, data, crc, size) for i in range(members)])


READ = """
import json, zipfile, zlib
from blockflow import npz_archive
from blockflow.datafiles import DataFiles, DataFileError
# What reading does, counted (not timed: a machine's load is not the reader's work): archives the
# zip module opened, members opened and the bytes read from them, the bytes zlib inflated, zip
# directory entries counted by hand.
work = {{"archives": 0, "members": 0, "read": 0, "inflated": 0, "entries": 0}}
real_inflater = zlib.decompressobj
class CountedInflater:
    def __init__(self, *a, **k):
        self.real = real_inflater(*a, **k)
    def decompress(self, *a):
        out = self.real.decompress(*a)
        work["inflated"] += len(out)
        return out
    def flush(self, *a):
        out = self.real.flush(*a)
        work["inflated"] += len(out)
        return out
    def __getattr__(self, name):
        return getattr(self.real, name)
zlib.decompressobj = CountedInflater
real_zip, real_open, real_read = zipfile.ZipFile, npz_archive._open_member, npz_archive._Member.read
def counted_zip(*a, **k):
    work["archives"] += 1
    return real_zip(*a, **k)
def counted_open(*a):
    work["members"] += 1
    return real_open(*a)
def counted_read(self, n):
    data = real_read(self, n)
    work["read"] += len(data)
    return data
class CountedEntries:
    def __init__(self, real):
        self.real, self.size = real, real.size
    def unpack_from(self, *a):
        work["entries"] += 1
        return self.real.unpack_from(*a)
zipfile.ZipFile, npz_archive._open_member, npz_archive._Member.read = counted_zip, counted_open, counted_read
npz_archive._CENTRAL = CountedEntries(npz_archive._CENTRAL)
try:
    got = DataFiles({folder!r}).{kind}({name!r})
except DataFileError as exc:
    result = {{"outcome": "refused", "message": str(exc)}}
else:
    arrays = got if isinstance(got, dict) else {{"table": got[1]}}
    result = {{"outcome": "read", "shapes": {{k: list(a.shape) for k, a in arrays.items()}}}}
result["work"] = work
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def base_rss():
    r = run_python("from blockflow.datafiles import DataFiles, DataFileError\n")
    assert r.returncode == 0, r.output
    return r.peak_rss


def read_in_child(folder, name, kind="arrays", cap=1024 ** 3, env=None) -> dict:
    """Read a data file in a child under an address-space cap; its result, work and peak RSS."""
    before = snapshot(folder)
    r = run_python(READ.format(folder=str(folder), name=name, kind=kind), cap_bytes=cap, env=env)
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    assert changed_paths(before, snapshot(folder)) == set()   # reading writes nothing
    return {**json.loads(r.stdout), "peak": r.peak_rss}


# ------------------------------------------------------------------------------------ .npz


def test_an_npz_bomb_is_refused_from_its_directory_before_inflating(tmp_path, base_rss):
    """10 members of 1 GB of zeros each in a 10 MB file: today 8.6 s and a MemoryError under a
    2 GB cap; refused by the total the zip directory declares, inflating nothing."""
    npz_bomb(tmp_path / "bomb.npz")
    assert (tmp_path / "bomb.npz").stat().st_size < 12_000_000
    # with a budget that would allow it, the data-file limit refuses it
    r = read_in_child(tmp_path, "bomb.npz", env={"BLOCKFLOW_MEMORY_BUDGET": "64G"})
    assert r["outcome"] == "refused", r
    assert r["message"].startswith("'bomb.npz': its arrays would take 4.66 GiB"), r
    assert "the arrays of one data file may take at most 4.00 GiB" in r["message"]
    # the directory read, no member opened: nothing inflated
    assert r["work"] == {"archives": 1, "members": 0, "read": 0, "inflated": 0, "entries": 10}, r
    assert r["peak"] - base_rss < 32 * 2 ** 20, r
    # by default the memory budget (half of what the capped child may use) refuses it sooner
    r = read_in_child(tmp_path, "bomb.npz")
    assert r["outcome"] == "refused", r
    assert "more than the memory budget of" in r["message"] and "--memory-budget" in r["message"], r
    assert r["work"] == {"archives": 1, "members": 0, "read": 0, "inflated": 0, "entries": 10}, r
    assert r["peak"] - base_rss < 32 * 2 ** 20, r


def test_one_member_over_the_tensor_limit_is_refused(tmp_path, monkeypatch):
    """The one limit for one array (spec.MAX_TENSOR_BYTES, 4 GiB) holds in a data file too
    (lowered here: a zip of more than 4 GiB needs zip64 records this writer does not make)."""
    monkeypatch.setattr(spec, "MAX_TENSOR_BYTES", 100 * 2 ** 20)
    npz_bomb(tmp_path / "big.npz", members=1, each=200 * 2 ** 20)
    with pytest.raises(DataFileError, match=r"array 'a0' \(the zip directory says it inflates "
                                            r"to 209,715,328 bytes, its header included\) would "
                                            r"take 199\.99 MiB .*; one array may take at most "
                                            r"100\.00 MiB"):
        DataFiles(tmp_path).arrays("big.npz")


def test_a_bomb_within_the_limits_inflates_only_what_its_header_promises(tmp_path, base_rss):
    """The stream of a member inflates to 1 GB, but its header says 100 float64s and the
    directory agrees: 800 bytes are read, and that is all that is inflated."""
    head = npy_header((100,))
    data, _, _ = deflated_zeros(head, GB)
    crc = zlib.crc32(head + bytes(800))
    write_zip(tmp_path / "x.npz", [("x.npy", 8, data, crc, len(head) + 800)])
    r = read_in_child(tmp_path, "x.npz")
    assert r["outcome"] == "read" and r["shapes"] == {"x": [100]}, r
    # opened for its header, then for its data: the header twice and 800 bytes read, and no more
    # inflated than the zip module's read-ahead (4 KiB a read), not the 1 GB
    work = r["work"]
    assert work.pop("inflated") <= 2 * zipfile.ZipExtFile.MIN_READ_SIZE, r
    assert work == {"archives": 1, "members": 2, "read": 2 * len(head) + 800, "entries": 1}, r
    assert r["peak"] - base_rss < 32 * 2 ** 20, r


def test_a_header_promising_more_than_the_directory_is_refused(tmp_path):
    head = npy_header((GB // 8,))
    data, crc, _ = deflated_zeros(head, 800)
    write_zip(tmp_path / "x.npz", [("x.npy", 8, data, crc, len(head) + 800)])
    with pytest.raises(DataFileError, match=r"'x.npz': array 'x' is float64\[125000000\], "
                                            r"1,000,000,000 bytes, but the archive says it holds 800"):
        DataFiles(tmp_path).arrays("x.npz")


def test_a_directory_claiming_more_than_its_data_can_hold_is_refused(tmp_path, base_rss):
    """Never allocate what a directory claims: 3 GB cannot come out of 2 KB of deflate, and a
    stored member is as long as it is stored."""
    head = npy_header((3 * GB // 8,))
    data, crc, _ = deflated_zeros(head, 1000)
    write_zip(tmp_path / "lie.npz", [("x.npy", 8, data, crc, len(head) + 3 * GB)])
    r = read_in_child(tmp_path, "lie.npz")
    assert r["outcome"] == "refused", r
    assert "the zip directory says array 'x' inflates to 3,000,000,128 bytes, but" in r["message"]
    assert r["peak"] - base_rss < 32 * 2 ** 20, r
    write_zip(tmp_path / "stored.npz", [("x.npy", 0, head, zlib.crc32(head), len(head) + 800)])
    with pytest.raises(DataFileError, match="stored as 128 bytes, but the zip directory says 928"):
        DataFiles(tmp_path).arrays("stored.npz")


def test_two_hundred_thousand_members_are_refused_by_their_count_quickly(tmp_path, base_rss):
    """Today: 8.9 s and 224 MB to load 200,000 empty arrays. The count is read from the end
    record (zip64 here) before the zip module builds anything."""
    head = npy_header((0,))
    crc = zlib.crc32(head)
    write_zip(tmp_path / "many.npz", [(f"{i}.npy", 0, head, crc, len(head))
                                      for i in range(200_000)])
    r = read_in_child(tmp_path, "many.npz")
    assert r["outcome"] == "refused", r
    assert r["message"] == "'many.npz' holds 200,000 arrays; the limit is 10,000", r
    # refused by the end record's count: no directory entry read, no archive opened
    assert r["work"] == {"archives": 0, "members": 0, "read": 0, "inflated": 0, "entries": 0}, r
    assert r["peak"] - base_rss < 32 * 2 ** 20, r


def test_the_member_limit_is_read_from_datafiles_when_an_archive_is_read(tmp_path, monkeypatch):
    """MAX_NPZ_MEMBERS is blockflow.datafiles's limit (docs/limits.md): changed there, it holds
    for .npz archives, read in their own module (npz_archive.py), as it did before."""
    np.savez(tmp_path / "three.npz", a=np.zeros(1), b=np.zeros(1), c=np.zeros(1))
    assert len(DataFiles(tmp_path).arrays("three.npz")) == 3   # (npz_archive imported now)
    monkeypatch.setattr(datafiles, "MAX_NPZ_MEMBERS", 2)
    with pytest.raises(DataFileError, match="'three.npz' holds 3 arrays; the limit is 2$"):
        DataFiles(tmp_path).arrays("three.npz")

class _CountedEntries:
    """npz_archive's struct of a zip directory entry, counting the entries it reads (a Struct's
    own methods cannot be wrapped)."""

    def __init__(self, real):
        self.real, self.size, self.n = real, real.size, 0

    def unpack_from(self, *args):
        self.n += 1
        return self.real.unpack_from(*args)


def test_a_lying_member_count_is_caught_by_counting_the_directory(tmp_path, monkeypatch):
    from blockflow import npz_archive

    head = npy_header((0,))
    members = [(f"{i}.npy", 0, head, 0, len(head)) for i in range(20_000)]
    write_zip(tmp_path / "lies.npz", members, entries=3)
    archives = Calls(monkeypatch, zipfile, "ZipFile")
    entries = _CountedEntries(npz_archive._CENTRAL)
    monkeypatch.setattr(npz_archive, "_CENTRAL", entries)
    with pytest.raises(DataFileError, match="'lies.npz' holds more than 10,000 arrays; the "
                                            "limit is 10,000"):
        DataFiles(tmp_path).arrays("lies.npz")
    # counted up to one past the limit, before the zip module builds anything for 20,000
    assert (entries.n, archives.n) == (datafiles.MAX_NPZ_MEMBERS + 1, 0)


def test_what_np_savez_writes_still_loads(tmp_path):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.array([0, 1, 1], np.int64)
    f = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    np.savez(tmp_path / "a.npz", x=x, y=y, f=f, empty=np.zeros((0, 3)))
    np.savez_compressed(tmp_path / "b.npz", x=x, y=y)
    np.save(tmp_path / "c.npy", np.arange(5, dtype=">i4"))
    files = DataFiles(tmp_path)
    a = files.arrays("a.npz")
    assert set(a) == {"x", "y", "f", "empty"} and a["empty"].shape == (0, 3)
    for name, want in (("x", x), ("y", y), ("f", f)):
        np.testing.assert_array_equal(a[name], want)
        assert a[name].dtype == want.dtype and not a[name].flags.writeable
    b = files.arrays("b.npz")
    np.testing.assert_array_equal(b["x"], x)
    c = files.arrays("c.npy")["x"]
    assert c.dtype == np.dtype(">i4") and c.tolist() == [0, 1, 2, 3, 4]
    assert files.arrays("c.npy") is files.arrays("c.npy")      # cached


@pytest.mark.parametrize("members, problem", [
    ([("notes.txt", b"hello")], "its member 'notes.txt' is not an .npy array"),
    ([("x.npy", npy_header((1,)) + bytes(8)), ("x.npy", npy_header((1,)) + bytes(8))],
     "it holds two arrays named 'x'"),
    ([("x.npy", b"not numpy at all")], "array 'x' is not a numpy array"),
    ([("x.npy", npy_header((3,)) + bytes(8))], r"'z.npz': array 'x' is float64\[3\], 24 bytes, "
                                                 "but the archive says it holds 8"),
], ids=["not-npy", "twice", "garbage", "short"])
def test_archives_that_are_not_what_savez_writes_are_refused(tmp_path, members, problem):
    write_zip(tmp_path / "z.npz", [(n, 0, d, zlib.crc32(d), len(d)) for n, d in members])
    with pytest.raises(DataFileError, match=problem):
        DataFiles(tmp_path).arrays("z.npz")


def test_damaged_and_unusual_members_are_refused_with_a_message(tmp_path):
    head = npy_header((2,))
    good = head + np.array([1.0, 2.0]).tobytes()
    write_zip(tmp_path / "crc.npz", [("x.npy", 0, good, zlib.crc32(good) ^ 1, len(good))])
    with pytest.raises(DataFileError, match="'crc.npz': its member 'x.npy' is damaged"):
        DataFiles(tmp_path).arrays("crc.npz")
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = c.compress(good) + c.flush()
    write_zip(tmp_path / "cut.npz", [("x.npy", 8, data[:-4], zlib.crc32(good), len(good))])
    with pytest.raises(DataFileError, match="'cut.npz': (its member 'x.npy' is damaged|array 'x' "
                                            "ends after)"):
        DataFiles(tmp_path).arrays("cut.npz")
    longer = head + bytes(16) + bytes(1000)   # inflates to more than it says: read as it says
    data = zlib.compress(longer)[2:-4]
    write_zip(tmp_path / "more.npz", [("x.npy", 8, data, zlib.crc32(head + bytes(16)),
                                       len(head) + 16)])
    assert DataFiles(tmp_path).arrays("more.npz")["x"].tolist() == [0.0, 0.0]
    with zipfile.ZipFile(tmp_path / "bz.npz", "w", zipfile.ZIP_BZIP2) as z:
        z.writestr("x.npy", good)
    with pytest.raises(DataFileError, match="compressed with method 12; .npz archives are "
                                            "stored or deflated"):
        DataFiles(tmp_path).arrays("bz.npz")
    (tmp_path / "trunc.npz").write_bytes((tmp_path / "crc.npz").read_bytes()[:-10])
    with pytest.raises(DataFileError, match="not a numpy file"):
        DataFiles(tmp_path).arrays("trunc.npz")


# ------------------------------------------------------------------------------------ .npy


def test_an_npy_header_is_checked_against_the_file_before_allocating(tmp_path, base_rss):
    """A header claiming 1 GB with 100 bytes after it: today numpy tries to read (a
    MemoryError under a cap when the claim is bigger than the cap); refused from the header."""
    (tmp_path / "short.npy").write_bytes(npy_header((GB // 8,)) + bytes(100))
    # (a budget that would allow it: the header is caught lying about the file, not by size)
    r = read_in_child(tmp_path, "short.npy", cap=700 * 2 ** 20, env={"BLOCKFLOW_MEMORY_BUDGET": "64G"})
    assert r["outcome"] == "refused", r
    assert r["message"] == ("'short.npy': its array is float64[125000000], 1,000,000,000 bytes, "
                            "but only 100 follow its header"), r
    assert r["peak"] - base_rss < 32 * 2 ** 20, r
    (tmp_path / "huge.npy").write_bytes(npy_header((2 ** 40,), "<f4") + bytes(100))
    with pytest.raises(DataFileError, match=r"its array \(float32\[1099511627776\]\) would take "
                                            r"4,096\.00 GiB .* one array may take at most"):
        DataFiles(tmp_path).arrays("huge.npy")


@pytest.mark.parametrize("blob, problem", [
    (raw_npy_header("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }"),
     "an array of Python objects: it cannot be read without unpickling"),
    (raw_npy_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"),
     r"holds \[\('a', '<f4'\)\], not numbers"),
    (raw_npy_header("{'descr': '<c16', 'fortran_order': False, 'shape': (2,), }"),
     "holds complex128, not numbers"),
    (raw_npy_header("__import__('os').system('touch /tmp/blockflow-pwned')"),
     "a header numpy cannot have written"),
    (raw_npy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }"),
     "a header numpy cannot have written"),
    (raw_npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1000000000000000000000000000000), }"),
     "a shape no numpy array can have"),
    (raw_npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904), }"),
     "a shape no numpy array can have"),
    (raw_npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': " + repr((0,) * 65) + ", }"),
     "a shape no numpy array can have"),
    (raw_npy_header("{'descr': '<f8', 'fortran_order': 0, 'shape': (1,), 'x': 1}"),
     "a header numpy cannot have written"),
    (raw_npy_header("{'descr': 'nonsense', 'fortran_order': False, 'shape': (1,), }"),
     "an unknown dtype"),
    (raw_npy_header("(" * 5000), "a header numpy cannot have written"),
    (raw_npy_header(" " * 20_000, version=2), "a header of 20,000 bytes; the limit is 10,000"),
    (raw_npy_header("{}", version=9), r"an \.npy format version \(9\)"),
    (b"\x93NUMPY\x01\x00\xff\x00{'descr'", "ends in its header"),
    (b"\x93NUMPY\x01", "not a numpy array"),
    (b"PK\x05\x06" + bytes(10), "not a numpy file"),
    (b"\x80\x04K\x01.", "not a numpy file"),
], ids=["object", "structured", "complex", "code", "negative", "past-int64", "past-bytes", "65-axes", "keys",
        "dtype", "deep", "long", "version", "cut", "magic", "zip", "pickle"])
def test_npy_headers_numpy_cannot_have_written_are_refused(tmp_path, blob, problem):
    (tmp_path / "a.npy").write_bytes(blob)
    with pytest.raises(DataFileError, match=problem):
        DataFiles(tmp_path).arrays("a.npy")
    assert not Path("/tmp/blockflow-pwned").exists()


# ------------------------------------------------------------------------------------ .csv


def test_a_table_takes_its_array_and_little_more(tmp_path, base_rss):
    """1.5 million rows of 4 numbers (16.5 MB; a 48 MB array): today 434 MB at the peak and
    3.7 s; now the array and a few MB, in two streaming passes."""
    (tmp_path / "t.csv").write_text("a,b,c,label\n" + "1,2.5,-3,0\n" * 1_500_000)
    r = read_in_child(tmp_path, "t.csv", kind="table")
    assert r["outcome"] == "read" and r["shapes"] == {"table": [1_500_000, 4]}, r
    array = 1_500_000 * 4 * 8
    assert r["peak"] - base_rss <= array + 16 * 2 ** 20, (r["peak"] - base_rss) / array


def test_a_table_keeps_its_messages_and_names_physical_lines(tmp_path):
    cases = [("a,b\n1,2\n\n\n3\n", "'t.csv' line 5: 1 values, the header names 2 columns"),
             ("a,b\n1,2\n , \n3,x\n", "'t.csv' line 4: 'x' is not a number"),
             ('a,b\n"1\n",2\n3,"4\n5"\n', r"'t.csv' line 5: '4\\n5' is not a number"),
             ("a,a\n1,2\n", "each once"), ("1,2\n3,4\n", "it holds numbers"),
             ("a,b\n", "has a header but no rows"), ("", "is empty"), (" ,\n\n", "is empty"),
             ("a,b\n1,2\r3,4\n", None)]
    for text, problem in cases:
        (tmp_path / "t.csv").write_text(text, newline="")
        if problem is None:
            assert DataFiles(tmp_path).table("t.csv")[1].tolist() == [[1, 2], [3, 4]]
            continue
        with pytest.raises(DataFileError) as info:
            DataFiles(tmp_path).table("t.csv")
        assert problem in str(info.value) or __import__("re").search(problem, str(info.value)), \
            (text, str(info.value))
    (tmp_path / "t.csv").write_bytes(b"a,b\n1,\xff\n")
    with pytest.raises(DataFileError, match="'t.csv' is not UTF-8 text"):
        DataFiles(tmp_path).table("t.csv")
    (tmp_path / "t.csv").write_text("a,b\n1," + "9" * 200_000 + "\n")
    with pytest.raises(DataFileError, match="'t.csv' line 2: not a table .*field larger"):
        DataFiles(tmp_path).table("t.csv")
    (tmp_path / "t.csv").write_text("\ufeffa,b\n1,2\n", encoding="utf-8")
    names, table = DataFiles(tmp_path).table("t.csv")
    assert names == ["a", "b"] and table.tolist() == [[1, 2]] and not table.flags.writeable


def test_a_table_over_the_limits_is_refused_before_its_array_exists(tmp_path, monkeypatch):
    (tmp_path / "t.csv").write_text("a,b\n" + "1,2\n" * 1000)
    monkeypatch.setattr(datafiles, "MAX_DATA_BYTES", 10_000)
    with pytest.raises(DataFileError, match=r"'t.csv': its arrays would take 16,000 bytes "
                                            r"together \(its table of 1,000 rows x 2 columns"):
        DataFiles(tmp_path).table("t.csv")


# ------------------------------------------------------------------------------ the CLI


def test_check_names_the_block_and_the_file_of_a_bomb(tmp_path):
    """`blockflow check` on a project whose NumpyDataset names an .npz bomb: the diagram has
    an error (exit 1), the message names the block and the file, and nothing is written."""
    npz_bomb(tmp_path / "bomb.npz")
    project = Project()
    project.add_page("main").add_node("NumpyDataset", id="data", attrs={"path": "bomb.npz"})
    save_project(project, tmp_path / "p.bflow.json")
    before = snapshot(tmp_path)
    r = run_cli("check", tmp_path / "p.bflow.json", cwd=tmp_path, env={"BLOCKFLOW_MEMORY_BUDGET": "64G"})
    r.assert_clean_message()
    assert r.returncode == 1, r.output
    assert "main/data" in r.output and "'bomb.npz': its arrays would take 4.66 GiB" in r.output
    assert changed_paths(before, snapshot(tmp_path)) == set()
