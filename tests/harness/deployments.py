"""One deployment of `galley` processes for the fault tests: its environment, its
database and a log file per `galley run` started, never a pipe nobody reads (a full
pipe blocks the bot's logging, then the bot).

A test file's own `Deployment` adds what it needs to look at (a platform's posts, the
model's requests) to this one; the fakes it talks to are started by its fixture."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from core.store.engine import Store
from tests.harness.processes import GALLEY
from tests.harness.timing import scaled


@dataclass
class Processes:
    """`galley` commands and `galley run` processes sharing one environment and store."""

    env: dict[str, str]
    store: Store
    logs: Path
    started: int = field(default=0, kw_only=True)
    _open: list[IO[str]] = field(default_factory=list, kw_only=True)

    def galley(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """One `galley` command to its end, its output captured."""
        return subprocess.run(
            [str(GALLEY), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=scaled(timeout),
        )

    def start(
        self, failpoint: str | None = None, *, grace: int = 5, env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """`galley run`, its log in `log_of(n)` for the n-th start (from 1)."""
        run_env = self.env | (env or {})
        if failpoint:
            run_env["GALLEY_FAILPOINT"] = failpoint
        self.started += 1
        log = (self.logs / f"galley-run-{self.started}.log").open("w")
        self._open.append(log)
        return subprocess.Popen(
            [str(GALLEY), "run", "--shutdown-grace", str(grace)],
            env=run_env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        )

    def log_of(self, number: int) -> str:
        return (self.logs / f"galley-run-{number}.log").read_text()

    def close(self) -> None:
        for log in self._open:
            log.close()
        self.store.dispose()
