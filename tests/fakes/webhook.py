"""A local fake webhook destination, served over real HTTP (stdlib only).

``POST /hook`` stores a publication under its ``Idempotency-Key`` and answers
``{"id": "pub_<n>"}`` (the same key again: the same id, nothing stored);
``GET /status/<quoted key>`` answers 200 ``{"id": ...}`` if received, else 404.
``FakeWebhook(hold_visibility=s)`` makes it a destination whose reads lag its writes:
a publication is stored (and a repeated key deduplicated) at once, but the status read
answers 404 for it until `s` seconds after it arrived.
In-process: ``with FakeWebhook() as fake: fake.script_post(accept_then_hang(5))``.
Separate process (first stdout line is the URL)::

    python -m tests.fakes.webhook --port 0 --state-file PATH

``write_state(PATH, post_script=[...], status_script=[...])`` scripts it; ``read_posts``
and ``read_publications`` read ``PATH + ".log"`` and ``PATH + ".publications.json"``
(loaded again by a restarted server).
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from tests.fakes import server
from tests.fakes.server import RecordedRequest

HOOK_PATH = "/hook"
STATUS_PREFIX = "/status/"
QUEUES = ("post_script", "status_script")
PUBLICATIONS_SUFFIX = ".publications.json"  # what was received, kept across restarts


@dataclass(frozen=True)
class Action(server.ScriptedAction):
    """One scripted outcome for one request. Build with the functions below."""

    kind: str  # "accept" | "status" | "accept_then_hang" | "hang_before" | "drop" | ...
    code: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


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
    for name in QUEUES:
        if name in kwargs:
            kwargs[name] = [a.to_json() if isinstance(a, Action) else a for a in kwargs[name]]
    server.update_state(path, kwargs)


def read_posts(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """POSTs logged by a server using this state file: method, path, headers, body, at."""
    return server.read_log(path)


def read_publications(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Stored publications by Idempotency-Key ({"id", "body", "at"}) as last persisted."""
    return server.read_saved(path, PUBLICATIONS_SUFFIX)


# --- server -------------------------------------------------------------------------------


class _Handler(server.Handler["FakeWebhook"]):
    def do_POST(self) -> None:  # noqa: N802
        fake = self.server.fake
        body = self._read_json()
        headers = self._lower_headers()
        fake._record(RecordedRequest("POST", self.path, headers, body, time.time()))
        if self.path.split("?")[0] != HOOK_PATH:
            self._send_json(404, {"error": f"no route POST {self.path}"})
            return
        action = fake._next_action("post_script")
        if action.kind == "status":
            self._send_json(action.code, {"error": f"fake {action.code}"}, action.headers.items())
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
            self._send_json(action.code, {"error": f"fake {action.code}"}, action.headers.items())
            return
        found = fake.visible(unquote(path.removeprefix(STATUS_PREFIX)))
        if found is None:
            self._send_json(404, {"error": "not received"})
        else:
            self._send_json(200, {"id": found["id"]})


class FakeWebhook(server.FakeServer):
    """The fake destination. Use as a context manager, or call start()/stop()."""

    handler_class = _Handler
    backlog = 128

    def __init__(
        self,
        *,
        state_file: str | os.PathLike[str] | None = None,
        port: int = 0,
        hold_visibility: float = 0.0,
    ):
        super().__init__(state_file=state_file, port=port)
        self.hold_visibility = hold_visibility
        self._queues: dict[str, deque[Action]] = {name: deque() for name in QUEUES}
        self._lookups: list[str] = []
        self._publications: dict[str, dict[str, Any]] = {}
        if self.state_file is not None:
            self._publications = read_publications(self.state_file)

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
            return list(self._records)

    @property
    def lookups(self) -> list[str]:
        """The raw paths of GET /status/... requests, still percent-encoded."""
        with self._lock:
            return list(self._lookups)

    @property
    def publications(self) -> dict[str, dict[str, Any]]:
        """Distinct publications received: Idempotency-Key -> {"id", "body", "at"}."""
        with self._lock:
            return {k: dict(v) for k, v in self._publications.items()}

    def visible(self, key: str) -> dict[str, Any] | None:
        """What a status read sees of `key`: nothing until `hold_visibility` has passed."""
        with self._lock:
            found = self._publications.get(key)
        if found is None or time.time() < found.get("at", 0.0) + self.hold_visibility:
            return None
        return dict(found)

    def script_post(self, *actions: Action) -> None:
        """Append to the FIFO queue for POST /hook; each POST consumes one."""
        with self._lock:
            self._queues["post_script"].extend(actions)

    def script_status(self, *actions: Action) -> None:
        """Append to the FIFO queue for GET /status/...; each GET consumes one."""
        with self._lock:
            self._queues["status_script"].extend(actions)

    # --- used by the handler ---

    def _receive(self, key: str, body: dict[str, Any]) -> str:
        """Store once per key (atomically); a repeated key gets the first id back."""
        with self._lock:
            if key not in self._publications:
                pub_id = f"pub_{len(self._publications) + 1}"
                self._publications[key] = {"id": pub_id, "body": body, "at": time.time()}
                self._save(PUBLICATIONS_SUFFIX, self._publications)
            return str(self._publications[key]["id"])

    def _next_action(self, queue: str) -> Action:
        """The in-memory queue first, then the state file's (re-read on each request)."""
        action, _ = self._next_scripted(self._queues[queue], Action, queue)
        return action or accept()


def main(argv: list[str] | None = None) -> None:
    server.serve_main(FakeWebhook, argv, server.arg_parser("Fake webhook destination"))


if __name__ == "__main__":
    main()
