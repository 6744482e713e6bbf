"""HTTP mode's `/slack/events` refuses before reading: a request without Slack's
signature headers, a `Content-Length` over 1 MiB, and a chunked body that never ends are
answered while the server has read nothing (or at most the cap) of what was sent.

Through a real uvicorn server in a thread, serving the bot's own Starlette app; a raw
socket sends the request so the test, not an HTTP client, decides how much is sent. What
the app pulled from uvicorn is counted at the ASGI `receive` it is given.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn
from slack_bolt import App

from bot.inbound import MAX_BODY, SlackEvents
from bot.server import web_app
from tests.harness.slack_requests import signed_headers
from tests.harness.timing import scaled

SECRET = "inbound-limits-secret"
CHUNK = 64 * 1024
SENT_AT_MOST = 32 * 1024 * 1024  # what the client gives up after, if nothing answers
ONE_READ = 256 * 1024  # what uvicorn hands the app at once: one asyncio socket read, at most


class CountedApp:
    """The app, with every body byte it receives counted."""

    def __init__(self, app: Any) -> None:
        self.app, self.read = app, 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def counted() -> Any:
            message = await receive()
            self.read += len(message.get("body", b""))
            return message

        await self.app(scope, counted, send)


@dataclass
class Served:
    port: int
    app: CountedApp
    acted: list[str]  # deliveries that got past the signature and the replay check


@pytest.fixture
def served() -> Iterator[Served]:
    bolt = App(signing_secret=SECRET, token="xoxb-test", token_verification_enabled=False)
    acted: list[str] = []

    def first(delivery: str) -> bool:
        acted.append(delivery)
        return True

    app = CountedApp(web_app(SlackEvents(bolt, SECRET, first), lambda: (True, "ok")))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.01)
        yield Served(listener.getsockname()[1], app, acted)
    finally:
        server.should_exit = True
        thread.join(scaled(5))
        listener.close()


def endless(chunk: bytes) -> Iterator[bytes]:
    while True:
        yield chunk


def post(port: int, headers: dict[str, str], body: Iterator[bytes]) -> int:
    """Send the headers, then `body` until the server answers (or `SENT_AT_MOST`); the
    answer's status code."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=scaled(5))
    with sock:
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        sock.sendall(f"POST /slack/events HTTP/1.1\r\nHost: galley\r\n{head}\r\n".encode())
        sock.settimeout(0.2)
        sent = 0
        for piece in body:
            if select.select([sock], [], [], 0)[0] or sent > SENT_AT_MOST:
                break  # answered, or the server reads whatever it is sent
            try:
                sock.sendall(piece)
            except (TimeoutError, BrokenPipeError, ConnectionResetError):
                break  # the server stopped reading: its answer is waiting
            sent += len(piece)
        sock.settimeout(scaled(5))
        answer = b""
        while b"\r\n" not in answer:
            more = sock.recv(4096)
            assert more, f"the connection closed with no answer after {sent} bytes"
            answer += more
    return int(answer.split(b" ", 2)[1])


def signed(**extra: str) -> dict[str, str]:
    return signed_headers(SECRET, "") | extra


@pytest.mark.slow
def test_an_unsigned_post_claiming_400_mib_is_refused_before_any_byte_is_read(
    served: Served,
) -> None:
    headers = {"Content-Type": "application/json", "Content-Length": str(400 * 1024 * 1024)}
    assert post(served.port, headers, endless(b"x" * CHUNK)) == 401
    assert served.app.read == 0 and served.acted == []


@pytest.mark.slow
def test_a_signed_post_claiming_more_than_1_mib_is_answered_413_unread(served: Served) -> None:
    headers = signed(**{"Content-Length": str(MAX_BODY + 1)})
    assert post(served.port, headers, endless(b"x" * CHUNK)) == 413
    assert served.app.read == 0 and served.acted == []


@pytest.mark.slow
def test_a_chunked_body_that_never_ends_is_cut_off_at_the_cap(served: Served) -> None:
    piece = b"x" * CHUNK
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    headers = signed(**{"Transfer-Encoding": "chunked"})
    assert post(served.port, headers, endless(chunk)) == 413
    assert MAX_BODY < served.app.read <= MAX_BODY + ONE_READ
    assert served.acted == []


@pytest.mark.slow
def test_a_signed_body_under_the_cap_still_reaches_bolt(served: Served) -> None:
    body = '{"type": "url_verification", "challenge": "c-1"}'
    headers = signed_headers(SECRET, body) | {
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
    }
    assert post(served.port, headers, iter([body.encode()])) == 200
    assert served.app.read == len(body) and len(served.acted) == 1
