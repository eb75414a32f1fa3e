"""Atomic file writes: a reader finds the old file or the new one, whole, never a mix.

Every file alpharl rewrites in place (run config, checkpoint, summary,
diagnostics snapshot, fills, LOBSTER cache) goes through ``atomic_writer``:

1. the bytes go to a temporary file in the target's own directory (a rename is
   atomic only within one file system);
2. the file is flushed and fsynced, so its content is on disk before its name;
3. ``os.replace`` puts it in place (atomic on POSIX: a kill at any moment
   leaves the old file or the new one);
4. the directory is fsynced, so the rename itself survives a power loss.

On an error in any step (a full disk included) the temporary file is removed
and the old file is left untouched. Only a kill (``kill -9``, a power loss)
can leave a temporary behind: it is hidden (``.<name>.<random>.tmp``) and
``remove_stale_temps`` deletes such files when a run next starts in that
directory.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

#: Mode of written files: readable by everyone, as ``open()`` makes them under the usual umask
#: (``mkstemp`` creates owner-only files; a cache beside shared data should be readable like the data).
FILE_MODE = 0o644
#: Names of the temporaries ``atomic_writer`` makes (``mkstemp``: a dot, the target's name, 8 random
#: characters of [a-z0-9_], ``.tmp``); only files of this shape are ever removed as stale.
TEMP_PREFIX, TEMP_SUFFIX = ".", ".tmp"
_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
#: Test hook: ``ALPHARL_TEST_PAUSE_IN=<file name>[:<n>]`` makes ``pause_for_tests`` sleep
#: ``ALPHARL_TEST_PAUSE_S`` seconds (default 1) inside the n-th write (default the first) of that
#: file, after creating the file ``ALPHARL_TEST_PAUSE_MARK`` names: the kill-anywhere test's window.
PAUSE_ENV, PAUSE_S_ENV, PAUSE_MARK_ENV = "ALPHARL_TEST_PAUSE_IN", "ALPHARL_TEST_PAUSE_S", "ALPHARL_TEST_PAUSE_MARK"
_pause_counts: dict[str, int] = {}


@contextlib.contextmanager
def atomic_writer(path: Path | str) -> Iterator[BinaryIO]:
    """Open a temporary binary file that replaces ``path`` when the block ends without an error.

    For writers that want a file object (``np.savez``, ``pyarrow`` writers); they must
    leave it open.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{TEMP_PREFIX}{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), FILE_MODE)
            yield f
            f.flush()
            os.fsync(f.fileno())
            pause_for_tests(path.name)
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


def remove_stale_temps(directory: Path | str) -> list[str]:
    """Delete the temporaries a killed ``atomic_writer`` left in ``directory``; the names removed.

    Call it only where no other process writes (a run directory at the start of its run)."""
    removed = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in os.scandir(directory):
            if _TEMP_NAME.match(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(entry.name)
    return removed


def pause_for_tests(label: str) -> None:
    """Sleep here when the test hook names ``label`` (a file name) and this is its n-th write."""
    wanted = os.environ.get(PAUSE_ENV)
    if not wanted:
        return
    name, _, nth = wanted.partition(":")
    if name != label:
        return
    _pause_counts[label] = _pause_counts.get(label, 0) + 1
    if _pause_counts[label] == int(nth or 1):
        if os.environ.get(PAUSE_MARK_ENV):
            Path(os.environ[PAUSE_MARK_ENV]).touch()
        time.sleep(float(os.environ.get(PAUSE_S_ENV, "1")))


__all__ = ["atomic_write", "atomic_writer", "fsync_dir", "remove_stale_temps", "pause_for_tests", "FILE_MODE"]
