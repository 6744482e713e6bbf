"""The launcher's server (`python -m tests.harness.forkserver`): imports what a `galley`
command imports, once, then forks a process per command line it is sent.

Each request is one JSON line on stdin: the command line, its environment, working
directory and output files. Each new `galley` process is forked twice, so that it is
not this server's child but the test worker's (a child subreaper, see
`tests/harness/launcher.py`): the test process waits for it, signals it and reads its
exit status as it would a `subprocess.Popen`'s. The reply is its pid, once it has been
handed over.

In the new process nothing of the server is left but the imported modules: its
environment, argv, working directory and standard streams are the request's, and it
runs `bot.launch.main`, the `galley` executable's own entry point, to the interpreter's
normal exit (its threads joined, its exit code its own).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from typing import Any

# What `galley run` and the commands load before their first line of work, among them
# the model's SDK (its import is most of a start) and the platforms' clients.
PRELOAD = (
    "bot.launch",
    "bot.cli",
    "bot.run",
    "anthropic",
    "core.drafting.anthropic_drafter",
    "core.drafting.batch_drafter",
    "uvicorn",
    "atproto",
    "mastodon",
    "httpx",
)


def preload() -> None:
    for name in PRELOAD:
        __import__(name)
    gc.collect()
    gc.freeze()  # what the forked processes share stays shared (no writes by the collector)


def serve() -> None:
    preload()
    print("ready", flush=True)
    for line in sys.stdin:
        reply = launch(json.loads(line))
        print(reply, flush=True)


def launch(request: dict[str, Any]) -> int:
    """The new process's pid, once it is no longer this server's child."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:  # the middle process: forks the command, tells its pid, leaves
        os.close(read_end)
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            run_command(request)  # never returns
        os.write(write_end, f"{pid}\n".encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as told:
        pid = int(told.readline())
    os.waitpid(middle, 0)  # gone: its child now belongs to the nearest subreaper
    return pid


def run_command(request: dict[str, Any]) -> None:
    """Become the `galley` process the request asks for, and exit as it exits."""
    os.chdir(request["cwd"])
    _redirect(0, os.devnull, os.O_RDONLY)
    _redirect(1, request["stdout"] or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    _redirect(2, request["stderr"] or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [request["executable"], *request["args"]]
    main_module = sys.modules["__main__"]  # as the `galley` script, not `python -m`
    main_module.__package__, main_module.__spec__ = None, None
    from bot.launch import main

    main()  # typer's app ends with SystemExit; the interpreter exits as `galley` would
    sys.exit(0)


def _redirect(fd: int, path: str, flags: int) -> None:
    opened = os.open(path, flags, 0o644)
    os.dup2(opened, fd)
    os.close(opened)


if __name__ == "__main__":
    serve()
