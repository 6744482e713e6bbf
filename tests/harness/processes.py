"""Helpers for tests that run real processes: the fakes as servers, `galley` commands."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Protocol

from tests import PYCACHE
from tests.harness.timing import scaled

REPO = Path(__file__).resolve().parents[2]
GALLEY = Path(sys.prefix) / "bin" / "galley"


def first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The first line a child prints, or "" if it prints nothing in time."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return proc.stdout.readline().strip()


@contextmanager
def fake_server(module: str, state_file: Path) -> Iterator[str]:
    """Run `python -m <module> --port 0 --state-file …` and yield its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--port", "0", "--state-file", str(state_file)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = first_line(proc, timeout=scaled(30.0))
        assert url.startswith("http://"), f"{module} did not start: {url!r}"
        yield url
    finally:
        stop(proc)


class Stoppable(Protocol):
    """A child process: a `subprocess.Popen`, or a `galley` the launcher started."""

    stdout: IO[str] | None

    def terminate(self) -> None: ...
    def kill(self) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...


def stop(proc: Stoppable, timeout: float = 10.0) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=scaled(timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=scaled(5))
    if proc.stdout is not None:
        proc.stdout.close()


# Child processes share compiled modules outside the repo with the test process
# (tests/__init__.py): without them each `galley` start spends seconds compiling imports
# where PYTHONDONTWRITEBYTECODE is set.


def galley_env(**values: str) -> dict[str, str]:
    """The test's environment for a child `galley`, without a leftover failpoint."""
    skip = {"GALLEY_FAILPOINT", "PYTHONDONTWRITEBYTECODE"}
    env = {k: v for k, v in os.environ.items() if k not in skip}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    env.update(values)
    return env


def galley_run_env(
    config: Path, db_url: str, *, anthropic_url: str, slack_url: str, **values: str
) -> dict[str, str]:
    """The environment of a child `galley run` on the fake Anthropic and Slack servers,
    serving HTTP on a free port; `values` add to it or override it."""
    return galley_env(
        GALLEY_CONFIG=str(config),
        GALLEY_DATABASE_URL=db_url,
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=anthropic_url,
        SLACK_BOT_TOKEN="xoxb-test",
        SLACK_SIGNING_SECRET="test-secret",
        GALLEY_SLACK_API_URL=slack_url + "/api/",
        GALLEY_HTTP_PORT="0",
        **values,
    )


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll until `condition()`; give up after `timeout` seconds, scaled (harness/timing.py)."""
    deadline = time.monotonic() + scaled(timeout)
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
