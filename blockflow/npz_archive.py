"""Reading an .npz archive of a project's data without trusting it (blockflow.datafiles's
rules, docs/limits.md "Data files"): its zip directory's member count and sizes are checked
before the zip module reads it, every member's .npy header before any array is read, and each
array is read into the one buffer its header sized. Its own module so that only a command that
reads an .npz imports ``zipfile`` (and the compression modules it brings: 5 ms of start-up).
"""
from __future__ import annotations

import os
import struct
import zipfile
import zlib

import numpy as np

from blockflow import datafiles, spec
from blockflow.datafiles import DataFileError, _npy_header, _NPY_HEADER_MAX, _read_npy, _Total

__all__ = ["read_npz"]

# An .npz's zip directory larger than this is refused before it is read (a directory entry of a
# member np.savez writes takes about 100 bytes).
_MAX_ZIP_DIRECTORY_BYTES = 16 * 1024 * 1024


def read_npz(name: str, f, room=None) -> dict:
    """The arrays of an .npz archive: its directory (member count and sizes) is checked before
    the zip module reads it, every member's .npy header before any array is read (``room``, as
    for datafiles._Total, is told the arrays' bytes then)."""
    _check_zip_directory(name, f)
    try:
        archive = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise DataFileError(f"'{name}' is not a numpy file (a damaged .npz archive: "
                            f"{exc})") from None
    with archive:
        members, declared = {}, _Total(name)
        for info in archive.infolist():   # the directory's sizes, before inflating anything
            if not info.filename.endswith(".npy"):
                raise DataFileError(f"'{name}': its member '{info.filename}' is not an .npy "
                                    "array")
            key = info.filename[:-4]
            if key in members:
                raise DataFileError(f"'{name}': it holds two arrays named '{key}'")
            members[key] = info
            _check_member_sizes(name, key, info)
            declared.add(max(0, info.file_size - _NPY_HEADER_MAX),   # without its header
                         f"array '{key}' (the zip directory says it inflates to "
                         f"{info.file_size:,} bytes, its header included)")
        promised = _Total(name, room=room)
        for key, info in members.items():   # each header's dtype and shape, before any data
            with _open_member(name, archive, info) as m:
                dtype, shape, _, header = _npy_header(m, f"array '{key}'", name)
            nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
            promised.add(nbytes, f"array '{key}' ({dtype.name}{spec.shape_text(shape)})")
            if header + nbytes > info.file_size:
                raise DataFileError(f"'{name}': array '{key}' is {dtype.name}{spec.shape_text(shape)}, "
                                    f"{nbytes:,} bytes, but the archive says it holds "
                                    f"{max(0, info.file_size - header):,}")
        out = {}
        for key, info in members.items():   # exactly those bytes: the archive cannot lie here
            with _open_member(name, archive, info) as m:
                out[key] = _read_npy(m, f"array '{key}'", info.file_size, _Total(name), name)
    return out


# What reading a damaged member raises: a bad CRC or local header, data that does not inflate
# or ends early, an encrypted member.
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError,
            RuntimeError)


# Deflate turns at most 1032 bytes into 1 (zlib's documented maximum ratio), a little more
# for the stream's own header and end.
_DEFLATE_RATIO, _DEFLATE_SLACK = 1032, 1024


def _check_member_sizes(name: str, key: str, info) -> None:
    """The sizes the zip directory gives a member must be possible: stored as is, or deflated
    (what np.savez and np.savez_compressed write) at most 1032 to 1. Any other size is a
    damaged or hostile archive, which would else make the reader allocate what it claims."""
    if info.compress_type == zipfile.ZIP_STORED:
        if info.file_size != info.compress_size:
            raise DataFileError(f"'{name}': array '{key}' is stored as {info.compress_size:,} "
                                f"bytes, but the zip directory says {info.file_size:,}")
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        most = info.compress_size * _DEFLATE_RATIO + _DEFLATE_SLACK
        if info.file_size > most:
            raise DataFileError(f"'{name}': the zip directory says array '{key}' inflates to "
                                f"{info.file_size:,} bytes, but {info.compress_size:,} deflated "
                                f"bytes inflate to {most:,} at most")
    else:
        raise DataFileError(f"'{name}': array '{key}' is compressed with method "
                            f"{info.compress_type}; .npz archives are stored or deflated")


def _open_member(name: str, archive: zipfile.ZipFile, info):
    try:
        return _Member(name, archive.open(info))
    except _DAMAGED as exc:
        raise DataFileError(f"'{name}': its member '{info.filename}' cannot be read "
                            f"({exc})") from None


class _Member:
    """A member of an archive being read, whose errors (a bad CRC, data that does not inflate)
    become DataFileErrors; reads copy into the caller's buffer, a piece at a time."""

    def __init__(self, name: str, stream):
        self.name, self.stream = name, stream

    def read(self, n: int) -> bytes:
        try:
            return self.stream.read(n)
        except _DAMAGED as exc:
            raise DataFileError(f"'{self.name}': its member '{self.stream.name}' is damaged "
                                f"({exc})") from None

    def readinto(self, buf) -> int:
        data = self.read(len(buf))
        buf[:len(data)] = data
        return len(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stream.close()


_EOCD = struct.Struct("<4s4H2LH")          # end of central directory record
_ZIP64_LOCATOR = struct.Struct("<4sLQL")   # (20 bytes)
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # (56 bytes)
_CENTRAL = struct.Struct("<4s6H3L5H2L")    # a central directory entry (46 bytes)


def _check_zip_directory(name: str, f) -> None:
    """Refuse an archive whose central directory is too large or lists more than
    MAX_NPZ_MEMBERS members, counting its entries without building anything for them."""
    limit = datafiles.MAX_NPZ_MEMBERS     # read when used: datafiles's limit, as it is now
    size = os.fstat(f.fileno()).st_size
    tail_len = min(size, _EOCD.size + 65535)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        raise DataFileError(f"'{name}' is not a numpy file (a damaged .npz archive: no zip "
                            "directory)")
    eocd_pos = size - tail_len + at
    entries, cd_size = _EOCD.unpack_from(tail, at)[4:6]
    cd_end = eocd_pos
    z64 = eocd_pos - _ZIP64_LOCATOR.size - _ZIP64_EOCD.size   # where zipfile looks for it too
    if z64 >= 0 and tail[at - _ZIP64_LOCATOR.size:at - _ZIP64_LOCATOR.size + 4] == b"PK\x06\x07":
        f.seek(z64)
        rec = f.read(_ZIP64_EOCD.size)
        if len(rec) == _ZIP64_EOCD.size and rec[:4] == b"PK\x06\x06":
            entries, cd_size = _ZIP64_EOCD.unpack(rec)[7:9]
            cd_end = z64
    if entries > limit:   # 0xFFFF in a zip without zip64 records: that many or more
        shown = f"{entries:,}" if entries != 0xFFFF else "65,535 or more"
        raise DataFileError(f"'{name}' holds {shown} arrays; the limit is {limit:,}")
    if cd_size > _MAX_ZIP_DIRECTORY_BYTES or cd_size > cd_end:
        raise DataFileError(f"'{name}': its zip directory is {cd_size:,} bytes; the limit is "
                            f"{_MAX_ZIP_DIRECTORY_BYTES:,}")
    f.seek(cd_end - cd_size)
    directory = f.read(cd_size)
    count, at = 0, 0
    while at + _CENTRAL.size <= len(directory) and directory[at:at + 4] == b"PK\x01\x02":
        fields = _CENTRAL.unpack_from(directory, at)
        count += 1
        if count > limit:   # the count the end record gives may be a lie
            raise DataFileError(f"'{name}' holds more than {limit:,} arrays; the limit "
                                f"is {limit:,}")
        at += _CENTRAL.size + fields[10] + fields[11] + fields[12]   # name, extra, comment
    f.seek(0)
