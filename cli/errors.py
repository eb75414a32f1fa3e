"""Bad input ends in one line naming what is wrong and exit code 2, never a traceback."""
from __future__ import annotations

import sys

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
