"""Writing an export to the files the user named: ``NAME.py`` and, when the model has state,
``NAME.pt`` beside it (the initial values ``Model`` loads). Each is written to a temporary in
the same folder and renamed over the target, so a link there is replaced, never written
through, and a failed write leaves the old file whole."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from blockflow import ownfiles
from blockflow.export.errors import ExportError
from blockflow.optional import need


__all__ = ["write_text_file", "write_torch_files", "values_path"]


def values_path(path) -> Path:
    """Where the initial values of the module written to ``path`` go."""
    return Path(path).with_suffix(".pt")


def _replace(path: Path, write) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    # 0o666 minus the umask, as any new file (mkstemp's 0600 hid the model from the other users
    # of a shared machine); exclusive and never through a link
    fd, tmp = ownfiles.create_temporary(str(folder), path.name)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_file(path, text: str) -> None:
    _replace(Path(path), lambda fh: fh.write(text.encode("utf-8")))


def write_torch_files(export, path) -> list[Path]:
    """Write the module's source to ``path`` and its state (if any) beside it; the paths written."""
    path = Path(path)
    if export.state and values_path(path) == path:
        raise ExportError(f"{path.name} is where the module's values go: name the module NAME.py")
    written = []
    if export.state:
        torch = need("torch")
        state = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in export.state.items()}
        target = values_path(path)
        _replace(target, lambda fh: torch.save(state, fh))
        written.append(target)
    write_text_file(path, export.source)
    written.insert(0, path)
    return written
