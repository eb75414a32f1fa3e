"""Atomic file writes: a reader finds the old file or the new one, whole, never a mix.

Every file alpharl rewrites in place (run config, checkpoint, summary,
diagnostics snapshot, fills, LOBSTER cache) goes through ``atomic_writer``:

1. the bytes go to a temporary file in the target's own directory (a rename is
   atomic only within one file system);
2. the file is flushed and fsynced, so its content is on disk before its name;
3. ``os.replace`` puts it in place (atomic on POSIX: a kill at any moment
   leaves the old file or the new one);
4. the directory is fsynced, so the rename itself survives a power loss.

On an error in any step the temporary file is removed and the old file is
left untouched.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

#: Mode of written files: readable by everyone, as ``open()`` makes them under the usual umask
#: (``mkstemp`` creates owner-only files; a cache beside shared data should be readable like the data).
FILE_MODE = 0o644


@contextlib.contextmanager
def atomic_writer(path: Path | str) -> Iterator[BinaryIO]:
    """Open a temporary binary file that replaces ``path`` when the block ends without an error.

    For writers that want a file object (``np.savez``, ``pyarrow`` writers); they must
    leave it open.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), FILE_MODE)
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def atomic_write(path: Path | str, data: str | bytes) -> Path:
    """Replace ``path`` by ``data`` atomically (text is written as UTF-8)."""
    with atomic_writer(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


def fsync_dir(directory: Path | str) -> None:
    """fsync a directory: makes the names created or renamed in it durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["atomic_write", "atomic_writer", "fsync_dir", "FILE_MODE"]
