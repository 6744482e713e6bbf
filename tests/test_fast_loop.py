"""The fast loop (`pytest -m "not slow"`) starts no process, no bot and no HTTP server:
a test that does is marked `slow`, by a fixture declared with `starts_a_server` or by its
own mark, and an unmarked one that tries fails (tests/harness/slow_marks.py)."""

from __future__ import annotations

import socket
import subprocess
from types import SimpleNamespace
from typing import Any

import pytest

from tests.harness.slow_marks import StartedOutsideSlow, mark_server_tests, starts_a_server


def test_an_unmarked_test_that_listens_on_a_socket_fails(
    fast_tests_start_no_server: list[str],
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        with pytest.raises(StartedOutsideSlow, match="not marked 'slow'"):
            sock.listen()
    assert [what.split(" (")[0] for what in fast_tests_start_no_server] == ["listens on"]
    fast_tests_start_no_server.clear()  # refused, as it should be: nothing to fail for


def test_an_unmarked_test_that_starts_a_process_fails(
    fast_tests_start_no_server: list[str],
) -> None:
    with pytest.raises(StartedOutsideSlow, match="starts the process"):
        subprocess.run(["true"], check=True)
    assert len(fast_tests_start_no_server) == 1
    fast_tests_start_no_server.clear()


class _Item:
    """What `mark_server_tests` reads of a collected test: its fixtures and its marks."""

    def __init__(self, *fixtures: Any) -> None:
        self._fixtureinfo = SimpleNamespace(
            name2fixturedefs={f.__name__: [SimpleNamespace(func=f)] for f in fixtures}
        )
        self.marks: list[str] = []

    def add_marker(self, mark: str) -> None:
        self.marks.append(mark)


def test_a_test_using_a_server_fixture_is_marked_slow_and_no_other() -> None:
    @starts_a_server
    def fake_server() -> None: ...

    def tmp_folder() -> None: ...

    serving, plain = _Item(fake_server, tmp_folder), _Item(tmp_folder)
    mark_server_tests([serving, plain])  # type: ignore[list-item]
    assert (serving.marks, plain.marks) == (["slow"], [])
