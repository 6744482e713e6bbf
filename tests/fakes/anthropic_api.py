"""A local fake of the Anthropic Messages API, served over real HTTP (stdlib only).

In-process::

    with FakeAnthropic() as fake:
        fake.script(status(429, headers={"retry-after": "0"}), ok(text="hello"))
        client = anthropic.Anthropic(api_key="test", base_url=fake.url, max_retries=0)

Separate process (first stdout line is the URL; serves until killed)::

    python -m tests.fakes.anthropic_api --port 0 --state-file PATH

``write_script(PATH, [status(500)])`` scripts the next responses and ``read_requests(PATH)``
returns the requests logged (JSON lines) to ``PATH + ".log"``.
"""

from __future__ import annotations

import argparse
import fcntl
import itertools
import json
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
DEFAULT_USAGE = {
    "input_tokens": 12,
    "output_tokens": 34,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
}


@dataclass(frozen=True)
class Action:
    """One scripted response. Build with ok(), status(), hang() or drop()."""

    kind: str  # "ok" | "status" | "hang" | "drop"
    text: str | None = None
    delay: float = 0.0
    code: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Action:
        return cls(**data)


def ok(text: str | None = None, delay: float = 0.0) -> Action:
    """A normal 200 response (text defaults to the server's default text)."""
    return Action("ok", text=text, delay=delay)


def status(code: int, body: Any = None, headers: dict[str, str] | None = None) -> Action:
    """An error response; body defaults to Anthropic-shaped error JSON for `code`."""
    return Action("status", code=code, body=body, headers=dict(headers or {}))


def hang(seconds: float = 30.0) -> Action:
    """Read and record the request, send nothing for `seconds`, then close the socket."""
    return Action("hang", seconds=seconds)


def drop() -> Action:
    """Read and record the request, then close the socket without any response."""
    return Action("drop")


def error_body(code: int, message: str | None = None) -> dict[str, Any]:
    err_type = ERROR_TYPES.get(code, "api_error" if code >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": err_type, "message": message or f"fake {code}"}}


def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # keys lower-cased
    body: Any  # parsed JSON, or the raw text if it was not JSON
    at: float  # time.time()


# --- cross-process state file -------------------------------------------------------------


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with Path(f"{path}.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_state(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_state(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)


def write_script(path: str | os.PathLike[str], actions: Iterable[Action], **defaults: Any) -> None:
    """Replace the scripted queue in the state file. Optional `text`, `delay` and `usage`
    keyword arguments change the server's defaults for unscripted requests."""
    p = Path(path)
    with _file_lock(p):
        state = _read_state(p)
        state["script"] = [a.to_json() for a in actions]
        state.update(defaults)
        _write_state(p, state)


def read_requests(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Requests logged by a server using this state file: dicts with method, path,
    headers, body, at."""
    try:
        lines = Path(f"{path}.log").read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


# --- server -------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeAnthropic

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out or disconnect are expected here


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        req = RecordedRequest(
            "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time()
        )
        n = fake._record(req)
        if self.path.split("?")[0].rstrip("/") != "/v1/messages":
            self._send_json(404, error_body(404, f"no route POST {self.path}"), n)
            return
        action, defaults = fake._next_action()
        if action.kind in ("hang", "drop"):
            if action.kind == "hang":
                fake._wait(action.seconds)  # returns early if the server stops
            self.close_connection = True  # close the socket; no response at all
            return
        if action.kind == "status":
            payload = error_body(action.code) if action.body is None else action.body
            self._send_json(action.code, payload, n, action.headers)
            return
        problem = _validate(body)
        if problem:
            self._send_json(400, error_body(400, problem), n)
            return
        if fake._wait(action.delay or float(defaults.get("delay", 0))):
            self.close_connection = True  # server stopped while "thinking"
            return
        text = action.text if action.text is not None else defaults.get("text")
        if text is None:
            text = "Draft for: " + _last_user_text(body["messages"])
        message = {
            "id": f"msg_fake{n:06d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {**DEFAULT_USAGE, **defaults.get("usage", {})},
        }
        self._send_json(200, message, n)

    def _send_json(
        self, code: int, payload: Any, n: int = 0, headers: dict[str, str] | None = None
    ) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        encoded = data.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(encoded)))
        if n:
            self.send_header("request-id", f"req_{n}")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(encoded)
        self.wfile.flush()


def _validate(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    missing = [k for k in ("model", "max_tokens", "messages") if k not in body]
    if missing:
        return f"missing required field(s): {', '.join(missing)}"
    if not isinstance(body["messages"], list) or not body["messages"]:
        return "messages: must be a non-empty list"
    if body.get("stream"):
        return "the fake does not implement streaming"
    return None


def _last_user_text(messages: list[Any]) -> str:
    for msg in reversed(messages):
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(
                    b.get("text", "")
                    for b in content
                    if isinstance(b, dict) and b.get("type") == "text"
                )
    return ""


class FakeAnthropic:
    """The fake server. Use as a context manager, or call start()/stop()."""

    def __init__(
        self,
        *,
        text: str | None = None,
        usage: dict[str, int] | None = None,
        delay: float = 0.0,
        state_file: str | os.PathLike[str] | None = None,
        port: int = 0,
    ) -> None:
        self.text = text  # default reply text; None means "Draft for: <last user text>"
        self.usage = dict(usage or {})  # overrides merged into DEFAULT_USAGE
        self.delay = delay  # default seconds before answering
        self.state_file = Path(state_file) if state_file is not None else None
        self._bind_port = port  # 0: let the OS pick a free port
        self._lock = threading.Lock()
        self._queue: deque[Action] = deque()
        self._requests: list[RecordedRequest] = []
        self._counter = itertools.count(1)
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """Scripted (in-memory) actions not yet consumed."""
        with self._lock:
            return len(self._queue)

    def script(self, *actions: Action) -> None:
        """Append actions to the FIFO queue; each request consumes one."""
        with self._lock:
            self._queue.extend(actions)

    def start(self) -> FakeAnthropic:
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
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- used by the handler ---

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def _wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True if the server was stopped meanwhile."""
        return self._stop.wait(seconds) if seconds > 0 else self._stop.is_set()

    def _record(self, req: RecordedRequest) -> int:
        with self._lock:
            self._requests.append(req)
            n = next(self._counter)
        if self.state_file is not None:
            line = json.dumps(asdict(req)) + "\n"
            with _file_lock(self.state_file), Path(f"{self.state_file}.log").open("a") as fh:
                fh.write(line)
        return n

    def _next_action(self) -> tuple[Action, dict[str, Any]]:
        defaults: dict[str, Any] = {"text": self.text, "delay": self.delay, "usage": self.usage}
        with self._lock:
            action = self._queue.popleft() if self._queue else None
        if self.state_file is not None:
            with _file_lock(self.state_file):
                state = _read_state(self.state_file)
                defaults.update({k: state[k] for k in ("text", "delay", "usage") if k in state})
                script = state.get("script") or []
                if action is None and script:  # in-memory queue first, then the state file
                    action = Action.from_json(script[0])
                    state["script"] = script[1:]
                    _write_state(self.state_file, state)
        return action or ok(), defaults


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake Anthropic Messages API")
    parser.add_argument("--port", type=int, default=0, help="0 (default) picks a free port")
    parser.add_argument("--state-file", required=True)
    parser.add_argument("--text", default=None)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    fake = FakeAnthropic(
        text=args.text, delay=args.delay, state_file=args.state_file, port=args.port
    ).start()
    print(fake.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
