"""Which tests are `slow`: every test that starts a process, a bot or an HTTP server.

The fast loop (`pytest -m "not slow"`) runs the rules of the domain without any of them.
A test is marked by what it uses: a fixture declared with `@starts_a_server` marks, at
collection, every test that uses it directly or through another fixture; a test that
starts one in its own body carries `@pytest.mark.slow` itself. `starts_nothing` is the
guard: inside an unmarked test, listening on a socket or starting a process fails the
test, naming what it started, so the fast loop cannot quietly grow a server again.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

MARK = "slow"
_STARTS_A_SERVER = "_galley_starts_a_server"
# matplotlib asks fontconfig for its fonts once per process, whichever test draws first.
LIBRARY_PROBES = frozenset({"fc-list"})

Fixture = TypeVar("Fixture", bound=Callable[..., Any])


class StartedOutsideSlow(AssertionError):
    """An unmarked test listened on a socket or started a process."""


def starts_a_server(fixture: Fixture) -> Fixture:
    """Put under `@pytest.fixture`: the fixture starts a server, a bot or a process, so
    every test using it is `slow`."""
    setattr(fixture, _STARTS_A_SERVER, True)
    return fixture


def _uses_a_server(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    # name2fixturedefs holds every fixture the test uses, directly or through another;
    # the last definition of a name is the one that applies to this test
    return any(
        getattr(defs[-1].func, _STARTS_A_SERVER, False)
        for defs in info.name2fixturedefs.values()
        if defs
    )


def mark_server_tests(items: list[pytest.Item]) -> None:
    """Mark `slow` every test that uses a fixture declared with `starts_a_server`."""
    for item in items:
        if _uses_a_server(item):
            item.add_marker(MARK)


def is_slow(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARK) is not None


@contextmanager
def starts_nothing(test: str) -> Iterator[list[str]]:
    """Within the block, `socket.listen` and `subprocess.Popen` raise StartedOutsideSlow;
    yields the list of what was started (for a failure raised in another thread)."""
    started: list[str] = []
    listen, popen_init = socket.socket.listen, subprocess.Popen.__init__

    def refuse(what: str) -> StartedOutsideSlow:
        started.append(what)
        return StartedOutsideSlow(
            f"{test} {what} but is not marked {MARK!r}: mark it "
            f"(@pytest.mark.{MARK}) or use a fixture in tests/harness/slow_marks.py"
        )

    def guarded_listen(sock: socket.socket, *args: Any) -> None:
        raise refuse(f"listens on {sock.getsockname()}")

    def guarded_popen(proc: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
        program = args[0] if isinstance(args, list | tuple) and args else args
        if str(program) in LIBRARY_PROBES:
            return popen_init(proc, args, *rest, **kw)
        raise refuse(f"starts the process {args!r}")

    socket.socket.listen = guarded_listen  # type: ignore[method-assign,assignment]
    subprocess.Popen.__init__ = guarded_popen  # type: ignore[method-assign,assignment]
    try:
        yield started
    finally:
        socket.socket.listen = listen  # type: ignore[method-assign]
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
