"""A local fake of Slack's Socket Mode server: a real WebSocket server (the `websockets`
library) behind a TCP relay that can break the link the ways networks do.

The Web API fake answers `apps.connections.open` (app token checked) with a one-use
``ws://127.0.0.1:<port>/link/?ticket=N`` from `FakeSocketMode.issue_url`; attach it with
``FakeSocketMode(slack_fake)``. Each connection gets `hello` (optionally late), then the
envelopes a test sends (`slash_commands`, `interactive`, `events_api`), spread across open
connections as Slack spreads them. Every ack is recorded with its latency.

Faults, each on every open link: `reset()` (TCP RST), `close()` (a WebSocket close frame),
`refresh()` (a `disconnect` message, `refresh_requested`, then a close), `eof()` (TCP FIN
with no close frame, as proxies and load balancers do), `blackhole()` (a silently half-open
link: nothing passes either way, nothing is closed), and `restart()` the whole server.
"""

from __future__ import annotations

import itertools
import json
import select
import socket
import struct
import threading
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from tests.fakes.slack_api import FakeSlack

APP_TOKEN = "xapp-1-A0GALLEY-1-test"


class Fault(StrEnum):
    """What the relay does to a link."""

    NONE = "none"
    RESET = "reset"  # RST: the peer's next read fails at once
    EOF = "eof"  # FIN without a close frame
    BLACKHOLE = "blackhole"  # bytes vanish both ways; the sockets stay open


@dataclass(frozen=True)
class Ack:
    envelope_id: str
    payload: dict[str, Any] | None  # the optional response payload
    latency: float  # seconds from sending the envelope to receiving its ack
    connection: int


@dataclass
class _Sent:
    envelope: dict[str, Any]
    at: float
    connection: int


@dataclass
class _Link:
    """One client connection through the relay: client socket <-> WebSocket server."""

    client: socket.socket
    upstream: socket.socket
    fault: Fault = Fault.NONE
    done: threading.Event = field(default_factory=threading.Event)

    def pump(self) -> None:
        try:
            while not self.done.is_set():
                if self.fault in (Fault.RESET, Fault.EOF):
                    self._break(reset=self.fault == Fault.RESET)
                    return
                readable, _, _ = select.select([self.client, self.upstream], [], [], 0.05)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        self._break(reset=False)
                        return
                    if self.fault != Fault.BLACKHOLE:
                        (self.upstream if sock is self.client else self.client).sendall(data)
        except OSError:
            self._break(reset=False)

    def _break(self, *, reset: bool) -> None:
        if reset:  # SO_LINGER 0: close() sends RST instead of FIN
            with suppress(OSError):
                self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        for sock in (self.client, self.upstream):
            with suppress(OSError):
                sock.close()
        self.done.set()


class FakeSocketMode:
    """The fake. Use as a context manager, or call start()/stop()."""

    def __init__(
        self,
        web_api: FakeSlack | None = None,
        *,
        app_token: str = APP_TOKEN,
        hello_delay: float = 0.0,
        refresh_grace: float = 1.0,
    ) -> None:
        self.app_token = app_token
        self.hello_delay = hello_delay  # seconds before `hello` on each new connection
        self.refresh_grace = refresh_grace  # seconds between `disconnect` and the close
        self._lock = threading.RLock()
        self._tickets: set[str] = set()
        self._ticket_numbers = itertools.count(1)
        self._conn_numbers = itertools.count(1)
        self._open: dict[int, ServerConnection] = {}  # connection number -> greeted connection
        self._links: list[_Link] = []
        self._sent: dict[str, _Sent] = {}
        self.acks: list[Ack] = []
        self.connections: list[tuple[int, float]] = []  # (number, time.monotonic() of hello)
        self._round_robin = itertools.count()
        self._ack_arrived = threading.Condition(self._lock)
        self._ws: Server | None = None
        self._listener: socket.socket | None = None
        self._relay_port = 0
        self._threads: list[threading.Thread] = []
        if web_api is not None:
            web_api.socket_mode = self

    # --- life cycle ---

    def start(self) -> Self:
        self._ws = serve(
            self._serve_connection,
            "127.0.0.1",
            0,
            process_request=self._check_ticket,
            compression=None,
            ping_interval=None,  # the client's pings keep the link; the fake never drops first
        )
        ws_thread = threading.Thread(target=self._ws.serve_forever, daemon=True)
        self._listener = socket.create_server(("127.0.0.1", self._relay_port), reuse_port=False)
        self._relay_port = self._listener.getsockname()[1]
        relay_thread = threading.Thread(target=self._accept_links, daemon=True)
        self._threads = [ws_thread, relay_thread]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.reset()
        if self._listener is not None:
            with suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        if self._ws is not None:
            self._ws.shutdown()
        for thread in self._threads:
            thread.join(timeout=5)
        with self._lock:
            self._open.clear()

    def restart(self, down_for: float = 0.5) -> None:
        """Every link reset, nothing listening for `down_for` seconds, then back."""
        self.stop()
        time.sleep(down_for)
        self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- used by the Web API fake ---

    def issue_url(self, token: str) -> str | None:
        """`apps.connections.open`: a one-use URL, or None if `token` is not the app token."""
        if token != self.app_token:
            return None
        ticket = f"{next(self._ticket_numbers)}-{uuid.uuid4().hex[:8]}"
        with self._lock:
            self._tickets.add(ticket)
        return f"ws://127.0.0.1:{self._relay_port}/link/?ticket={ticket}&app_id=A0GALLEY"

    # --- sending ---

    def send(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        envelope_id: str | None = None,
        retry_attempt: int = 0,
        connection: int | None = None,
        wait: float = 5.0,
    ) -> str:
        """Send one envelope to `connection` (default: the next open one, round-robin);
        waits up to `wait` s for a connection to be open. Returns its envelope_id."""
        envelope_id = envelope_id or str(uuid.uuid4())
        envelope: dict[str, Any] = {
            "envelope_id": envelope_id,
            "payload": payload,
            "type": kind,
            "accepts_response_payload": kind == "slash_commands"
            or payload.get("type") == "view_submission",
        }
        if kind == "events_api" or retry_attempt:
            envelope |= {
                "retry_attempt": retry_attempt,
                "retry_reason": "timeout" if retry_attempt else "",
            }
        number, conn = self._pick(connection, wait)
        with self._lock:
            self._sent[envelope_id] = _Sent(envelope, time.monotonic(), number)
        conn.send(json.dumps(envelope))
        return envelope_id

    def wait_ack(self, envelope_id: str, timeout: float = 5.0) -> Ack | None:
        deadline = time.monotonic() + timeout
        with self._ack_arrived:
            while True:
                found = [a for a in self.acks if a.envelope_id == envelope_id]
                if found:
                    return found[0]
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._ack_arrived.wait(left)

    def acks_for(self, envelope_id: str) -> list[Ack]:
        with self._lock:
            return [a for a in self.acks if a.envelope_id == envelope_id]

    def open_connections(self) -> list[int]:
        with self._lock:
            return sorted(self._open)

    def wait_connected(self, count: int = 1, timeout: float = 15.0, *, after: int = 0) -> float:
        """Seconds until `count` connections numbered above `after` are open (greeted)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if len([n for n in self.open_connections() if n > after]) >= count:
                return time.monotonic() - started
            time.sleep(0.01)
        raise TimeoutError(f"no {count} new connection(s) within {timeout}s")

    def last_connection(self) -> int:
        with self._lock:
            return max((n for n, _ in self.connections), default=0)

    # --- faults ---

    def reset(self) -> None:
        self._fault_all(Fault.RESET)

    def eof(self) -> None:
        self._fault_all(Fault.EOF)

    def blackhole(self) -> None:
        self._fault_all(Fault.BLACKHOLE)

    def close(self, code: int = 1001) -> None:
        """A WebSocket close frame on every open connection."""
        for conn in self._connections():
            with suppress(ConnectionClosed, OSError):
                conn.close(code)

    def refresh(self, reason: str = "refresh_requested") -> None:
        """`disconnect` on every open connection, then (after refresh_grace) a close."""
        message = json.dumps(
            {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-fake"}}
        )
        conns = self._connections()
        for conn in conns:
            with suppress(ConnectionClosed, OSError):
                conn.send(message)
        if reason == "refresh_requested":

            def close_later() -> None:
                time.sleep(self.refresh_grace)
                for conn in conns:
                    with suppress(ConnectionClosed, OSError):
                        conn.close(1001)

            threading.Thread(target=close_later, daemon=True).start()

    # --- internals ---

    def _fault_all(self, fault: Fault) -> None:
        with self._lock:
            links = [link for link in self._links if not link.done.is_set()]
            if fault != Fault.BLACKHOLE:
                self._open.clear()
        for link in links:
            link.fault = fault

    def _connections(self) -> list[ServerConnection]:
        with self._lock:
            return list(self._open.values())

    def _pick(self, connection: int | None, wait: float) -> tuple[int, ServerConnection]:
        deadline = time.monotonic() + wait
        while True:
            with self._lock:
                numbers = sorted(self._open)
                if connection is not None and connection in self._open:
                    return connection, self._open[connection]
                if connection is None and numbers:
                    number = numbers[next(self._round_robin) % len(numbers)]
                    return number, self._open[number]
            if time.monotonic() > deadline:
                raise TimeoutError("no open Socket Mode connection to send to")
            time.sleep(0.01)

    def _accept_links(self) -> None:
        assert self._listener is not None and self._ws is not None
        ws_port = self._ws.socket.getsockname()[1]
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", ws_port))
            link = _Link(client, upstream)
            with self._lock:
                self._links = [k for k in self._links if not k.done.is_set()] + [link]
            threading.Thread(target=link.pump, daemon=True).start()

    def _check_ticket(self, conn: ServerConnection, request: Request) -> Response | None:
        query = parse_qs(urlsplit(request.path).query)
        ticket = (query.get("ticket") or [""])[0]
        with self._lock:
            valid = ticket in self._tickets
            self._tickets.discard(ticket)  # one use, as Slack's are
        return None if valid else conn.respond(401, "invalid ticket\n")

    def _serve_connection(self, conn: ServerConnection) -> None:
        number = next(self._conn_numbers)
        if self.hello_delay:
            time.sleep(self.hello_delay)
        hello = {
            "type": "hello",
            "num_connections": len(self._open) + 1,
            "debug_info": {"host": "applink-fake", "approximate_connection_time": 18060},
            "connection_info": {"app_id": "A0GALLEY"},
        }
        try:
            conn.send(json.dumps(hello))
        except ConnectionClosed:
            return
        with self._lock:
            self._open[number] = conn
            self.connections.append((number, time.monotonic()))
        try:
            for raw in conn:
                self._record_ack(raw, number)
        except ConnectionClosed:
            pass
        finally:
            with self._lock:
                if self._open.get(number) is conn:
                    del self._open[number]

    def _record_ack(self, raw: str | bytes, number: int) -> None:
        now = time.monotonic()
        try:
            message = json.loads(raw)
        except ValueError:
            return
        envelope_id = message.get("envelope_id") if isinstance(message, dict) else None
        with self._ack_arrived:
            sent = self._sent.get(str(envelope_id))
            if sent is None:
                return
            ack = Ack(str(envelope_id), message.get("payload"), now - sent.at, number)
            self.acks.append(ack)
            self._ack_arrived.notify_all()
