"""A local fake web server for the `feed` and `url` readers, over real HTTP (stdlib only).

``publish(path, body, content_type)`` sets what ``GET path`` answers (publish again to
change it between reads, as a blog does); ``script(path, ...)`` queues one-off answers
for the next GETs of that path: ``status(304)`` (no body, as a real 304), ``status(500,
"...")``, ``slow(seconds)`` (the document, after a wait a reader's timeout ends first),
``drip(seconds)`` (the document's head, then its body one byte every `seconds`).
A path with nothing published answers 404. In-process only::

    with FakeWeb() as web:
        web.publish("/feed.xml", rss(...), RSS_TYPE)
        web.publish("/img/a.jpg", jpeg_bytes, "image/jpeg")  # images are served as bytes
        assert web.gets("/img/a.jpg") == 0
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from tests.fakes import server
from tests.fakes.server import RecordedRequest

RSS_TYPE = "application/rss+xml; charset=utf-8"
ATOM_TYPE = "application/atom+xml; charset=utf-8"
HTML_TYPE = "text/html; charset=utf-8"


@dataclass(frozen=True)
class Document:
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Action:
    """One scripted answer to one GET: a status with a body, or the document after a wait."""

    kind: str  # "status" | "slow" | "drip"
    code: int = 200
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def status(code: int, body: str = "", headers: dict[str, str] | None = None) -> Action:
    return Action("status", code=code, body=body, headers=dict(headers or {}))


def slow(seconds: float) -> Action:
    """Send nothing for `seconds` (less if the server stops), then the document."""
    return Action("slow", seconds=seconds)


def drip(seconds: float) -> Action:
    """Answer the document's head at once, then its body one byte every `seconds` (a
    server that holds a reader without ever letting a socket read time out)."""
    return Action("drip", seconds=seconds)


class _Handler(server.Handler["FakeWeb"]):
    def do_GET(self) -> None:  # noqa: N802
        fake = self.server.fake
        fake._record(RecordedRequest("GET", self.path, self._lower_headers(), None, time.time()))
        path = self.path.split("?")[0]
        action = fake._next_action(path)
        if action is not None and action.kind == "status":
            self._send(
                action.code, action.body.encode(), "text/plain; charset=utf-8", action.headers
            )
            return
        if action is not None and action.kind == "slow" and fake._wait(action.seconds):
            self.close_connection = True
            return
        document = fake.document(path)
        if action is not None and action.kind == "drip" and document is not None:
            self._drip(document, action.seconds)
            return
        if document is None:
            self._send(404, b"Not Found", "text/plain; charset=utf-8", {})
        else:
            self._send(200, document.body, document.content_type, document.headers)

    def _drip(self, document: Document, seconds: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", document.content_type)
        self.send_header("Content-Length", str(len(document.body)))
        self.end_headers()
        for byte in document.body:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            if self.server.fake._wait(seconds):
                break
        self.close_connection = True

    def _send(self, code: int, body: bytes, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(code)
        if code != 304:  # a 304 has neither a body nor a length (RFC 9110, section 15.4.5)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if code != 304:
            self.wfile.write(body)
        self.wfile.flush()


class FakeWeb(server.FakeServer):
    """Serves published documents. Use as a context manager, or call start()/stop()."""

    handler_class = _Handler
    backlog = 64

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__(host=host)
        self._documents: dict[str, Document] = {}
        self._scripts: dict[str, deque[Action]] = {}

    def publish(
        self, path: str, body: str | bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> str:
        """Serve `body` at `path` from now on; the document's URL."""
        encoded = body.encode() if isinstance(body, str) else body
        with self._lock:
            self._documents[path] = Document(encoded, content_type, dict(headers or {}))
        return self.url + path

    def script(self, path: str, *actions: Action) -> None:
        with self._lock:
            self._scripts.setdefault(path, deque()).extend(actions)

    def document(self, path: str) -> Document | None:
        with self._lock:
            return self._documents.get(path)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records)

    def gets(self, path: str) -> int:
        """How many GETs `path` received (a query left out): an image downloaded once."""
        return sum(1 for r in self.requests if r.path.split("?")[0] == path)

    def _next_action(self, path: str) -> Action | None:
        with self._lock:
            queue = self._scripts.get(path)
            return queue.popleft() if queue else None
