"""A local fake webhook destination, served over real HTTP (stdlib only).

``POST /hook`` stores a publication under its ``Idempotency-Key`` and answers
``{"id": "pub_<n>"}`` (the same key again: the same id, nothing stored);
``GET /status/<quoted key>`` answers 200 ``{"id": ...}`` if received, else 404.
In-process: ``with FakeWebhook() as fake: fake.script_post(accept_then_hang(5))``.
Separate process (first stdout line is the URL)::

    python -m tests.fakes.webhook --port 0 --state-file PATH

``write_state(PATH, post_script=[...], status_script=[...])`` scripts it; ``read_posts``
and ``read_publications`` read ``PATH + ".log"`` and ``PATH + ".publications.json"``
(loaded again by a restarted server).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import threading
import time
from collections import deque
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tests.fakes import anthropic_api
from tests.fakes.anthropic_api import RecordedRequest, _file_lock, _read_state, _write_state

HOOK_PATH = "/hook"
STATUS_PREFIX = "/status/"
QUEUES = ("post_script", "status_script")


@dataclass(frozen=True)
class Action:
    """One scripted outcome for one request. Build with the functions below."""

    kind: str  # "accept" | "status" | "accept_then_hang" | "hang_before" | "drop" | ...
    code: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Action:
        return cls(**data)


def accept() -> Action:
    """Behave normally (a placeholder to script a fault for a later request)."""
    return Action("accept")


def status(code: int, headers: dict[str, str] | None = None) -> Action:
    """Answer `code` with {"error": ...} and `headers`; no effect."""
    return Action("status", code=code, headers=dict(headers or {}))


def accept_then_hang(seconds: float = 30.0) -> Action:
    """Store the publication, then send nothing for `seconds` (or until stop) and close."""
    return Action("accept_then_hang", seconds=seconds)


def hang_before(seconds: float = 30.0) -> Action:
    """No effect; send nothing for `seconds` (or until stop), then close."""
    return Action("hang_before", seconds=seconds)


def drop() -> Action:
    """No effect; close the socket without an answer."""
    return Action("drop")


def accept_then_drop() -> Action:
    """Store the publication, then close the socket without an answer."""
    return Action("accept_then_drop")


# --- cross-process state file -------------------------------------------------------------


def write_state(path: str | os.PathLike[str], **kwargs: Any) -> None:
    """Replace the given keys of the state file: `post_script` and `status_script`
    ([Action, ...], consumed one per request, after the in-memory queues)."""
    p = Path(path)
    for name in QUEUES:
        if name in kwargs:
            kwargs[name] = [a.to_json() if isinstance(a, Action) else a for a in kwargs[name]]
    with _file_lock(p):
        _write_state(p, {**_read_state(p), **kwargs})


def read_posts(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """POSTs logged by a server using this state file: method, path, headers, body, at."""
    return anthropic_api.read_requests(path)


def read_publications(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Stored publications by Idempotency-Key ({"id", "body"}) as last persisted."""
    try:
        return dict(json.loads(Path(f"{path}.publications.json").read_text()))
    except (FileNotFoundError, ValueError):
        return {}


# --- server -------------------------------------------------------------------------------


class _Server(anthropic_api._Server):
    request_queue_size = 128
    fake: FakeWebhook  # type: ignore[assignment]


class _Handler(anthropic_api._Handler):
    """The Anthropic fake's handler (connection tracking, quiet log, JSON writer), re-routed."""

    server: _Server

    def do_POST(self) -> None:  # noqa: N802
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake._record(RecordedRequest("POST", self.path, headers, body, time.time()))
        if self.path.split("?")[0] != HOOK_PATH:
            self._send_json(404, {"error": f"no route POST {self.path}"})
            return
        action = fake._next_action("post_script")
        if action.kind == "status":
            self._send_json(action.code, {"error": f"fake {action.code}"}, 0, action.headers)
            return
        if action.kind in ("hang_before", "drop"):
            self._close_after(action.seconds)
            return
        key = headers.get("idempotency-key")
        if not key or not isinstance(body, dict):
            self._send_json(400, {"error": "need an Idempotency-Key and a JSON object"})
            return
        pub_id = fake._receive(key, body)
        if action.kind in ("accept_then_hang", "accept_then_drop"):
            self._close_after(action.seconds)
            return
        self._send_json(200, {"id": pub_id})

    def do_GET(self) -> None:  # noqa: N802
        fake = self.server.fake
        path = self.path.split("?")[0]
        if not path.startswith(STATUS_PREFIX):
            self._send_json(404, {"error": f"no route GET {self.path}"})
            return
        with fake._lock:
            fake._lookups.append(path)
        action = fake._next_action("status_script")
        if action.kind == "hang_before":
            self._close_after(action.seconds)
            return
        if action.kind == "status":
            self._send_json(action.code, {"error": f"fake {action.code}"}, 0, action.headers)
            return
        found = fake.publications.get(unquote(path.removeprefix(STATUS_PREFIX)))
        if found is None:
            self._send_json(404, {"error": "not received"})
        else:
            self._send_json(200, {"id": found["id"]})

    def _close_after(self, seconds: float) -> None:
        """Send nothing for `seconds` (0: none; ends early if the server stops), then close."""
        self.server.fake._wait(seconds)
        self.close_connection = True


class FakeWebhook:
    """The fake destination. Use as a context manager, or call start()/stop()."""

    def __init__(self, *, state_file: str | os.PathLike[str] | None = None, port: int = 0):
        self.state_file = Path(state_file) if state_file is not None else None
        self._bind_port = port
        self._lock = threading.RLock()
        self._queues: dict[str, deque[Action]] = {name: deque() for name in QUEUES}
        self._posts: list[RecordedRequest] = []
        self._lookups: list[str] = []
        self._publications: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        if self.state_file is not None:
            self._publications = read_publications(self.state_file)

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def hook_url(self) -> str:
        return self.url + HOOK_PATH

    @property
    def status_url(self) -> str:
        return self.url + STATUS_PREFIX + "{key}"

    @property
    def posts(self) -> list[RecordedRequest]:
        """Every POST received, whatever its fate."""
        with self._lock:
            return list(self._posts)

    @property
    def lookups(self) -> list[str]:
        """The raw paths of GET /status/... requests, still percent-encoded."""
        with self._lock:
            return list(self._lookups)

    @property
    def publications(self) -> dict[str, dict[str, Any]]:
        """Distinct publications received: Idempotency-Key -> {"id", "body"}."""
        with self._lock:
            return {k: dict(v) for k, v in self._publications.items()}

    def script_post(self, *actions: Action) -> None:
        """Append to the FIFO queue for POST /hook; each POST consumes one."""
        with self._lock:
            self._queues["post_script"].extend(actions)

    def script_status(self, *actions: Action) -> None:
        """Append to the FIFO queue for GET /status/...; each GET consumes one."""
        with self._lock:
            self._queues["status_script"].extend(actions)

    def start(self) -> FakeWebhook:
        self._stop.clear()
        self._server = _Server(("127.0.0.1", self._bind_port), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # wakes clients stuck in a hang
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeWebhook:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- used by the handler ---

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _wait(self, seconds: float) -> bool:
        return self._stop.wait(seconds) if seconds > 0 else self._stop.is_set()

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self._posts.append(req)
        if self.state_file is not None:
            line = json.dumps(asdict(req)) + "\n"
            with _file_lock(self.state_file), Path(f"{self.state_file}.log").open("a") as fh:
                fh.write(line)

    def _receive(self, key: str, body: dict[str, Any]) -> str:
        """Store once per key (atomically); a repeated key gets the first id back."""
        with self._lock:
            if key not in self._publications:
                pub_id = f"pub_{len(self._publications) + 1}"
                self._publications[key] = {"id": pub_id, "body": body}
                if self.state_file is not None:
                    with _file_lock(self.state_file):
                        target = Path(f"{self.state_file}.publications.json")
                        _write_state(target, self._publications)
            return str(self._publications[key]["id"])

    def _next_action(self, queue: str) -> Action:
        """The in-memory queue first, then the state file's (re-read on each request)."""
        with self._lock:
            action = self._queues[queue].popleft() if self._queues[queue] else None
        if action is None and self.state_file is not None:
            with _file_lock(self.state_file):
                state = _read_state(self.state_file)
                script = state.get(queue) or []
                if script:
                    action = Action.from_json(script[0])
                    state[queue] = script[1:]
                    _write_state(self.state_file, state)
        return action or accept()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake webhook destination")
    parser.add_argument("--port", type=int, default=0, help="0 (default) picks a free port")
    parser.add_argument("--state-file", required=True)
    args = parser.parse_args(argv)
    fake = FakeWebhook(state_file=args.state_file, port=args.port).start()
    print(fake.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
