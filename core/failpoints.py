"""Named points where tests crash a process or force an interleaving (docs/design.md §20).

With `GALLEY_FAILPOINT=<name>` set, reaching `failpoint("<name>")` ends the process at
once with `os._exit`: no cleanup, no commit, no finally blocks, as a crash would.
In-process, a test can `hook("<name>", fn)` to run `fn` right there (for example another
transaction between a read and the write that depends on it). In production neither is
set and a failpoint costs one environment lookup and one dictionary lookup.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

FAILPOINT_EXIT_CODE = 86
_hooks: dict[str, Callable[[], None]] = {}
_hooks_lock = threading.Lock()


def failpoint(name: str) -> None:
    if os.environ.get("GALLEY_FAILPOINT") == name:
        sys.stderr.write(f"galley: failpoint {name} reached, exiting\n")
        sys.stderr.flush()
        os._exit(FAILPOINT_EXIT_CODE)
    hooked = _hooks.get(name)
    if hooked is not None:
        hooked()


@contextmanager
def hook(name: str, action: Callable[[], None]) -> Iterator[None]:
    """Run `action` each time `failpoint(name)` is reached inside the `with` block."""
    with _hooks_lock:
        _hooks[name] = action
    try:
        yield
    finally:
        with _hooks_lock:
            _hooks.pop(name, None)
