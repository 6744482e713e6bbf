"""One deployment of `galley` processes for the fault tests: its environment, its
database and a log file per `galley run` started, never a pipe nobody reads (a full
pipe blocks the bot's logging, then the bot). Each process is started by the test
worker's launcher (tests/harness/launcher.py): a separate process, forked from one that
has imported Galley once.

A test file's own `Deployment` adds what it needs to look at (a platform's posts, the
model's requests) to this one; the fakes it talks to are started by its fixture."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from core.store.engine import Store
from tests.harness.launcher import LAUNCHER, LaunchedProcess
from tests.harness.timing import scaled


@dataclass
class Processes:
    """`galley` commands and `galley run` processes sharing one environment and store."""

    env: dict[str, str]
    store: Store
    logs: Path
    started: int = field(default=0, kw_only=True)

    def galley(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """One `galley` command to its end, its output captured."""
        return LAUNCHER.run(list(args), self.env, self.logs, scaled(timeout))

    def start(
        self, failpoint: str | None = None, *, grace: int = 5, env: dict[str, str] | None = None
    ) -> LaunchedProcess:
        """`galley run`, its log in `log_of(n)` for the n-th start (from 1)."""
        run_env = self.env | (env or {})
        if failpoint:
            run_env["GALLEY_FAILPOINT"] = failpoint
        self.started += 1
        log = self.logs / f"galley-run-{self.started}.log"
        return LAUNCHER.start(["run", "--shutdown-grace", str(grace)], run_env, stderr=log)

    def log_of(self, number: int) -> str:
        return (self.logs / f"galley-run-{number}.log").read_text()

    def close(self) -> None:
        self.store.dispose()
