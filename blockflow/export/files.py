"""Writing an export: ``NAME.py``, the file the user named, and, when the model has state,
``NAME.pt`` beside it (the initial values ``Model`` loads; ``--train`` adds ``NAME_data.pt`` and
``train.py``). Each is written to a temporary in the same folder and renamed over the target, so
a link there is replaced, never written through, and a failed write leaves the old file whole.

The files beside the named one are blockflow's own (``blockflow.ownfiles``): the user did not
name them, so one is replaced only when it is blockflow's own earlier export or a symbolic link
(the link, not what it points to); any other file there, the user's own ``train.py`` or a trained
checkpoint ``NAME.pt``, stops the export before anything is written."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np

from blockflow import ownfiles
from blockflow.export.errors import ExportError
from blockflow.optional import need


__all__ = ["write_text_file", "write_torch_files", "values_path", "check_side_files", "write_side_file"]


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


def check_side_files(named, paths) -> None:
    """Before anything is written: each of ``paths``, written beside the file ``named``, must be
    free, blockflow's own earlier file or a symbolic link; else OwnFileError naming it."""
    for path in paths:
        why = ownfiles.taken(path)
        if why and why != "is a symbolic link":
            raise ownfiles.OwnFileError(
                errno.EEXIST, f"{path} {why}, and the export writes {Path(path).name} beside {Path(named).name}: "
                              f"nothing was written (move it away, or export to another folder)")


def write_side_file(path, write) -> None:
    """Write the file ``path`` beside the named one as blockflow's own (check_side_files first):
    a symbolic link there is removed, never followed."""
    if os.path.islink(path):
        os.unlink(path)
    ownfiles.write_own(path, write, variants=False)


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
        target = values_path(path)
        check_side_files(path, [target])
        state = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in export.state.items()}
        write_side_file(target, lambda fh: torch.save(state, fh))
        written.append(target)
    write_text_file(path, export.source)
    written.insert(0, path)
    return written
