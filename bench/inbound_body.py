"""What a hostile request to `/slack/events` costs the bot's memory (docs/design.md §34):
an unsigned POST claiming 400 MiB and sending it, and a chunked body that keeps coming
(400 MiB unless answered). The bot's own Starlette app is served by uvicorn in a child
process; its resident memory (VmRSS, and the peak VmHWM) is read before and after.

    .venv/bin/python -m bench.inbound_body

PASS when the peak grew by less than 16 MiB for each; exits 1 otherwise.
"""

from __future__ import annotations

import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

TOTAL = 400 * 1024 * 1024
CHUNK = 1024 * 1024
GOAL_MIB = 16
SERVE = """
import socket
import uvicorn
from slack_bolt import App
from bot.inbound import SlackEvents
from bot.server import web_app
bolt = App(signing_secret="s", token="xoxb-bench", token_verification_enabled=False)
app = web_app(SlackEvents(bolt, "s", lambda _: True), lambda: (True, "ok"))
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])
"""
UNSIGNED = f"Content-Length: {TOTAL}\r\n"
CHUNKED = (
    "X-Slack-Signature: v0=00\r\nX-Slack-Request-Timestamp: 1\r\nTransfer-Encoding: chunked\r\n"
)


def memory_mib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) // 1024
    raise LookupError(key)


def send(port: int, headers: str, frame: Callable[[bytes], bytes]) -> tuple[str, int]:
    """The answer's status line, and how many bytes were sent before it came."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"POST /slack/events HTTP/1.1\r\nHost: galley\r\n{headers}\r\n".encode())
        sock.settimeout(1)
        sent = 0
        while sent < TOTAL and not select.select([sock], [], [], 0)[0]:
            try:
                sock.sendall(frame(b"x" * CHUNK))
            except OSError:
                break
            sent += CHUNK
        sock.settimeout(60)
        return sock.recv(200).split(b"\r\n")[0].decode(), sent


def measure(name: str, headers: str, frame: Callable[[bytes], bytes]) -> bool:
    child = subprocess.Popen([sys.executable, "-c", SERVE], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        time.sleep(1)
        before = memory_mib(child.pid, "VmRSS:")
        status, sent = send(port, headers, frame)
        time.sleep(0.5)
        after, peak = memory_mib(child.pid, "VmRSS:"), memory_mib(child.pid, "VmHWM:")
    finally:
        child.kill()
        child.wait()
    passed = peak - before < GOAL_MIB
    print(
        f"{name:40} {status:40} client sent {sent / 2**20:5.0f} MiB  "
        f"RSS {before} -> {after} MiB, peak {peak} MiB  {'PASS' if passed else 'MISS'}"
    )
    return passed


def main() -> int:
    results = [
        measure("unsigned, Content-Length 400 MiB", UNSIGNED, lambda piece: piece),
        measure(
            "signed headers, chunked without end",
            CHUNKED,
            lambda piece: f"{len(piece):x}\r\n".encode() + piece + b"\r\n",
        ),
    ]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
