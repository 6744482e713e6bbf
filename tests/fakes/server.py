"""What the local fake HTTP servers share (stdlib only): the threaded server and its quiet,
connection-tracking handler, the `FakeServer` base class (start/stop, context manager,
scripted queues, request log) and the cross-process state file.

A fake started with ``state_file=PATH`` reads its script and settings from ``PATH`` (JSON,
re-read on each request, so a test can change it while the fake runs in another process),
logs each request as a JSON line to ``PATH + ".log"`` and keeps anything it must remember
across restarts in ``PATH + "<suffix>"`` files. ``serve_main`` is the ``main()`` of each
fake's module: it prints the URL as its first stdout line, then serves until killed.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, Generic, Self, TypeVar

F = TypeVar("F", bound="FakeServer")
A = TypeVar("A", bound="ScriptedAction")
StrPath = str | os.PathLike[str]


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


@dataclass(frozen=True)
class ScriptedAction:
    """Base of each fake's frozen `Action` dataclass: how it goes in and out of a state file."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return cls(**data)


# --- cross-process state file -------------------------------------------------------------


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive lock on ``path + ".lock"`` (shared by every process using `path`)."""
    with Path(f"{path}.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_state(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; {} if it is missing or not a JSON object."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Replace `path` with `state` as JSON, atomically (write a temporary file, rename it)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)


def update_state(path: StrPath, values: dict[str, Any]) -> None:
    """Replace the given keys of the state file, keeping the others (under its lock)."""
    p = Path(path)
    with file_lock(p):
        write_state(p, {**read_state(p), **values})


def read_log(path: StrPath) -> list[dict[str, Any]]:
    """The records a fake using this state file logged to ``path + ".log"``."""
    try:
        lines = Path(f"{path}.log").read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def read_saved(path: StrPath, suffix: str) -> dict[str, Any]:
    """What a fake last saved with `FakeServer._save(suffix, ...)`; {} if nothing yet."""
    try:
        return dict(json.loads(Path(f"{path}{suffix}").read_text()))
    except (FileNotFoundError, ValueError):
        return {}


# --- server -------------------------------------------------------------------------------


class Server(ThreadingHTTPServer, Generic[F]):
    """Serves `host`:`port` with `handler` for `fake` (the handlers' ``server.fake``)."""

    daemon_threads = True

    def __init__(
        self, fake: F, port: int, handler: type[Handler[F]], backlog: int, host: str
    ) -> None:
        self.fake = fake
        self.request_queue_size = backlog  # read when the socket starts listening, below
        super().__init__((host, port), handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out or disconnect are expected here


class Handler(BaseHTTPRequestHandler, Generic[F]):
    """Keep-alive, silent, tracks its connection (so stop() can cut it) and writes JSON."""

    protocol_version = "HTTP/1.1"
    server: Server[F]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        # An answer is two writes (head, body): without this the body waits ~40 ms for
        # the client's delayed ACK of the head, a latency no real server has.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def _read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _read_json(self) -> Any:
        """The request body as JSON, or as text if it is not JSON."""
        raw = self._read_body()
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _lower_headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _send_json(self, code: int, payload: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
        """Answer `code` with `payload` (JSON-encoded unless already a string)."""
        data = payload if isinstance(payload, str) else json.dumps(payload)
        encoded = data.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(encoded)))
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(encoded)
        self.wfile.flush()

    def _close_after(self, seconds: float) -> None:
        """Send nothing for `seconds` (0: none; ends early if the server stops), then close."""
        self.server.fake._wait(seconds)
        self.close_connection = True


class FakeServer:
    """A fake served on 127.0.0.1 by a background thread. Use as a context manager, or call
    start()/stop(). Subclasses set `handler_class` (and `backlog` for bursts of connects)."""

    handler_class: ClassVar[type[Handler[Any]]]
    backlog: ClassVar[int] = 5  # socketserver's default listen queue

    def __init__(
        self, *, state_file: StrPath | None = None, port: int = 0, host: str = "127.0.0.1"
    ) -> None:
        self.state_file = Path(state_file) if state_file is not None else None
        self._bind_port = port  # 0: let the OS pick a free port
        self.host = host  # 127.0.0.2 for an "inside" server no found URL may reach
        self._lock = threading.RLock()
        self._records: list[Any] = []  # what _record() kept, oldest first
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._server: Server[Self] | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        self._stop.clear()
        self._server = Server(self, self._bind_port, self.handler_class, self.backlog, self.host)
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- used by the handlers ---

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True if the server was stopped meanwhile."""
        return self._stop.wait(seconds) if seconds > 0 else self._stop.is_set()

    def _record(self, record: Any) -> int:
        """Keep `record` (a dataclass), log it to the state file's .log; its number from 1."""
        with self._lock:
            self._records.append(record)
            n = len(self._records)
        if self.state_file is not None:
            line = json.dumps(asdict(record)) + "\n"
            with file_lock(self.state_file), Path(f"{self.state_file}.log").open("a") as fh:
                fh.write(line)
        return n

    def _next_scripted(
        self, queue: deque[A], action_type: type[A], *key: str
    ) -> tuple[A | None, dict[str, Any]]:
        """Pop the in-memory `queue`, else the first action of the state file's list at
        ``state[key[0]][key[1]]...``; also the state file's contents ({} without one)."""
        with self._lock:
            action = queue.popleft() if queue else None
        if self.state_file is None:
            return action, {}
        with file_lock(self.state_file):
            state = read_state(self.state_file)
            *outer, last = key
            scripts = state
            for name in outer:
                scripts = scripts.get(name) or {}
            script = scripts.get(last) or []
            if action is None and script:
                action = action_type.from_json(script[0])
                scripts[last] = script[1:]
                write_state(self.state_file, state)
        return action, state

    def _save(self, suffix: str, data: dict[str, Any]) -> None:
        """Persist `data` to ``state_file + suffix`` (read back with `read_saved`)."""
        if self.state_file is not None:
            with file_lock(self.state_file):
                write_state(Path(f"{self.state_file}{suffix}"), data)


# --- subprocess entry points --------------------------------------------------------------


def arg_parser(description: str) -> argparse.ArgumentParser:
    """The options every fake's `main()` takes: --port and --state-file."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0, help="0 (default) picks a free port")
    parser.add_argument("--state-file", required=True)
    return parser


def serve_main(
    fake_factory: Callable[..., FakeServer],
    argv: Sequence[str] | None,
    parser: argparse.ArgumentParser,
) -> None:
    """Parse `argv` with `parser`, start ``fake_factory(**options)`` (the options' names are
    its keyword arguments), print its URL as the first stdout line and serve until killed."""
    fake = fake_factory(**vars(parser.parse_args(argv))).start()
    print(fake.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()
