"""Bad input ends in one line naming what is wrong and exit code 2, never a traceback."""
from __future__ import annotations

import errno
import sys

from alpharl.checkpoint import CheckpointError
from alpharl.comm import RankError
from alpharl.config import ConfigError
from alpharl.dataset import DatasetError
from alpharl.evaluate import EvalError
from alpharl.export import ExportError
from alpharl.lobster.errors import LobsterFormatError
from alpharl.report import ReportError
from alpharl.rundir import RunDirError
from alpharl.windows import WindowError
from alpharl.study import StudyError

EXIT_BAD_INPUT = 2


class UserError(Exception):
    """An error caused by the user's input (file, option, run directory).

    Raise it anywhere below the CLI with a message that names the file, row
    or option; the entry point prints ``alpharl: error: <message>`` and exits 2.
    """


def fail(message: str) -> "None":
    sys.stderr.write(f"alpharl: error: {message}\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_BAD_INPUT)


#: errno values of a full disk or an exhausted quota.
_DISK_FULL = {"ENOSPC", "EDQUOT"}
#: errno values that describe bad input (a path that is missing, unreadable or not writable).
_PATH_ERRORS = {"ENOENT", "ENOTDIR", "EISDIR", "EACCES", "EPERM", "EROFS", "ENAMETOOLONG"}


def describe_os_error(exc: OSError) -> str | None:
    """One line for an ``OSError`` caused by the user's paths or disk, None for anything else.

    Writers in alpharl append (diagnostics) or write a temporary file and
    rename it (checkpoints, summaries), so a disk that fills up mid-write
    leaves every earlier file whole; the message says so.
    """
    name = errno.errorcode.get(exc.errno or 0, "")
    where = exc.filename if exc.filename is not None else "run directory"
    reason = exc.strerror or str(exc)
    if name in _DISK_FULL:
        return f"{where}: disk full while writing ({reason}); everything written before is intact"
    if name in _PATH_ERRORS:
        return f"{where}: {reason}"
    return None


#: Exceptions whose message is the whole story: printed as one line, exit 2.
ONE_LINE_ERRORS = (UserError, ConfigError, RunDirError, LobsterFormatError, CheckpointError, ReportError, EvalError,
                   ExportError, DatasetError, WindowError, StudyError, RankError)


class user_errors:
    """Context manager: turn bad-input exceptions into ``alpharl: error: <one line>`` and exit 2.

    Maps ``UserError`` and the one-line error types of the package
    (``ConfigError``, ``RunDirError``, ``LobsterFormatError``, ``CheckpointError``,
    ``ReportError``, ``EvalError``, ``ExportError``, ``DatasetError``, ``WindowError``, ``StudyError``, ``RankError``) and disk/path ``OSError``s; anything else propagates
    (a bug should show its traceback).
    """

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None:
            return False
        if isinstance(exc, ONE_LINE_ERRORS):
            fail(" ".join(str(exc).split()))
        if isinstance(exc, OSError):
            line = describe_os_error(exc)
            if line is not None:
                fail(line)
        return False
