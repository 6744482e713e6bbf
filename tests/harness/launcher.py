"""`galley` processes for the fault tests, started in a fraction of a fresh start's time.

A fresh `galley` spends about 3 CPU-seconds importing (the model's SDK alone half of it)
before its first line of work, and the fault tests start several hundred: on a 2-core
machine that was most of the suite. The test worker keeps one launcher server
(tests/harness/forkserver.py) that has imported them once; each command is a process
forked from it, as multiprocessing's forkserver does.

What a test gets is a real, separate process: its own pid, environment, files and
database connections, running the `galley` executable's entry point (`bot.launch.main`)
to its own exit, killed by real signals at its failpoints or by the test. The test
worker is made a child subreaper, so the process is the worker's child: `LaunchedProcess`
waits for it and reads its exit status as `subprocess.Popen` does. Tests of the
executable itself (its start-up, its imports) still exec `galley`
(tests/api/test_cli_launch.py and others).
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.harness.processes import GALLEY, REPO, galley_env
from tests.harness.timing import scaled

PR_SET_CHILD_SUBREAPER = 36
_numbered = itertools.count(1)  # output files of captured commands


class LaunchedProcess:
    """A launched `galley` process, with the part of `subprocess.Popen`'s interface the
    tests use: `pid`, `returncode`, `poll`, `wait`, `send_signal`, `terminate`, `kill`,
    and `communicate` when its output goes to `outputs` (standard output, error)."""

    stdout = None
    stderr = None

    def __init__(self, pid: int, args: list[str], outputs: tuple[Path, Path] | None) -> None:
        self.pid = pid
        self.args = args
        self.outputs = outputs
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Its output once it has exited, as `Popen.communicate` gives piped output."""
        assert self.outputs is not None, "started without captured output"
        self.wait(timeout)
        return self.outputs[0].read_text(), self.outputs[1].read_text()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # never a signal to a pid already reaped and reused
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Launcher:
    """The test worker's launcher server, started on first use; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: subprocess.Popen[str] | None = None

    def start(
        self,
        args: list[str],
        env: dict[str, str],
        *,
        cwd: Path = REPO,
        stdout: Path | None = None,
        stderr: Path | None = None,
    ) -> LaunchedProcess:
        """`galley ARGS` in `env`, its standard output and error to those files (none:
        discarded)."""
        request = {
            "executable": str(GALLEY),
            "args": args,
            "env": env,
            "cwd": str(cwd),
            "stdout": None if stdout is None else str(stdout),
            "stderr": None if stderr is None else str(stderr),
        }
        with self._lock:
            server = self._running()
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            pid = int(server.stdout.readline())
        outputs = None if stdout is None or stderr is None else (stdout, stderr)
        return LaunchedProcess(pid, [str(GALLEY), *args], outputs)

    def captured(
        self, args: list[str], env: dict[str, str], logs: Path, *, cwd: Path = REPO
    ) -> LaunchedProcess:
        """`galley ARGS` with its output kept in files under `logs`, for `communicate`."""
        name = f"galley-{next(_numbered)}"
        out, err = logs / f"{name}.out", logs / f"{name}.err"
        return self.start(args, env, cwd=cwd, stdout=out, stderr=err)

    def run(
        self, args: list[str], env: dict[str, str], logs: Path, timeout: float, *, cwd: Path = REPO
    ) -> subprocess.CompletedProcess[str]:
        """One command to its end, its output captured, as `subprocess.run` gives it."""
        process = self.captured(args, env, logs, cwd=cwd)
        try:
            stdout, stderr = process.communicate(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        assert process.returncode is not None
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def _running(self) -> subprocess.Popen[str]:
        if self._server is not None and self._server.poll() is None:
            return self._server
        _become_subreaper()
        self._server = subprocess.Popen(
            [sys.executable, "-m", "tests.harness.forkserver"],
            cwd=REPO,
            env=galley_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._server.stdout is not None
        ready = self._server.stdout.readline().strip()
        assert ready == "ready", f"the launcher did not start: {ready!r}"
        return self._server

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                assert self._server.stdin is not None
                self._server.stdin.close()
                self._server.wait(timeout=scaled(10))
                self._server = None


def _become_subreaper() -> None:
    """Orphans below this process are handed to it: a launched process's parent is the
    test worker once the server's middle process has left (tests/harness/forkserver.py)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


LAUNCHER = Launcher()
