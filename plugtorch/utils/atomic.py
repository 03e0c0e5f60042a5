"""Atomic file writes: a crash mid-write leaves the previous file (or none), never half a file."""
from __future__ import annotations

import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_write(path, mode: str = "wb"):
    """``with atomic_write(path) as f: f.write(...)`` — the data appears at ``path`` all at once.

    Writes a temporary file in the same directory, fsyncs it, gives it the
    permissions a plain ``open`` would, renames it over ``path`` and fsyncs the
    directory so the rename itself survives a power cut. On any exception the
    temporary file is removed and ``path`` is untouched.
    """
    path = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _new_file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def _new_file_mode(path: str) -> int:
    """The existing file's permissions, else what ``open(path, "w")`` would give (mkstemp's are 0600)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0o22)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # platforms where a directory cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
