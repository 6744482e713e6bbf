"""Named crash points for fault tests (DESIGN.md §9).

With `GALLEY_FAILPOINT=<name>` set, reaching `failpoint("<name>")` ends the process at
once with `os._exit`: no cleanup, no commit, no finally blocks, as a crash would.
Unset (always, in production) it costs one environment lookup.
"""

from __future__ import annotations

import os
import sys

FAILPOINT_EXIT_CODE = 86


def failpoint(name: str) -> None:
    if os.environ.get("GALLEY_FAILPOINT") == name:
        sys.stderr.write(f"galley: failpoint {name} reached, exiting\n")
        sys.stderr.flush()
        os._exit(FAILPOINT_EXIT_CODE)
