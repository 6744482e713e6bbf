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

import os
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import server
from tests.fakes.server import RecordedRequest as RecordedRequest
from tests.fakes.server import closed_port as closed_port

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
class Action(server.ScriptedAction):
    """One scripted response. Build with ok(), status(), hang() or drop()."""

    kind: str  # "ok" | "status" | "hang" | "drop"
    text: str | None = None
    delay: float = 0.0
    code: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


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


def write_script(path: str | os.PathLike[str], actions: Iterable[Action], **defaults: Any) -> None:
    """Replace the scripted queue in the state file. Optional `text`, `delay` and `usage`
    keyword arguments change the server's defaults for unscripted requests."""
    server.update_state(path, {"script": [a.to_json() for a in actions], **defaults})


def read_requests(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Requests logged by a server using this state file: dicts with method, path,
    headers, body, at."""
    return server.read_log(path)


# --- server -------------------------------------------------------------------------------


class _Handler(server.Handler["FakeAnthropic"]):
    def do_POST(self) -> None:  # noqa: N802
        fake = self.server.fake
        body = self._read_json()
        n = fake._record(
            RecordedRequest("POST", self.path, self._lower_headers(), body, time.time())
        )
        if self.path.split("?")[0].rstrip("/") != "/v1/messages":
            self._reply(404, error_body(404, f"no route POST {self.path}"), n)
            return
        action, defaults = fake._next_action()
        if action.kind in ("hang", "drop"):  # no response at all; hang returns early on stop
            self._close_after(action.seconds if action.kind == "hang" else 0)
            return
        if action.kind == "status":
            payload = error_body(action.code) if action.body is None else action.body
            self._reply(action.code, payload, n, action.headers)
            return
        problem = _validate(body)
        if problem:
            self._reply(400, error_body(400, problem), n)
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
        self._reply(200, message, n)

    def _reply(
        self, code: int, payload: Any, n: int, headers: dict[str, str] | None = None
    ) -> None:
        """JSON with the request's `request-id` header, then any scripted `headers`."""
        self._send_json(code, payload, [("request-id", f"req_{n}"), *(headers or {}).items()])


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


class FakeAnthropic(server.FakeServer):
    """The fake server. Use as a context manager, or call start()/stop()."""

    handler_class = _Handler

    def __init__(
        self,
        *,
        text: str | None = None,
        usage: dict[str, int] | None = None,
        delay: float = 0.0,
        state_file: str | os.PathLike[str] | None = None,
        port: int = 0,
    ) -> None:
        super().__init__(state_file=state_file, port=port)
        self.text = text  # default reply text; None means "Draft for: <last user text>"
        self.usage = dict(usage or {})  # overrides merged into DEFAULT_USAGE
        self.delay = delay  # default seconds before answering
        self._queue: deque[Action] = deque()

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records)

    @property
    def pending(self) -> int:
        """Scripted (in-memory) actions not yet consumed."""
        with self._lock:
            return len(self._queue)

    def script(self, *actions: Action) -> None:
        """Append actions to the FIFO queue; each request consumes one."""
        with self._lock:
            self._queue.extend(actions)

    def _next_action(self) -> tuple[Action, dict[str, Any]]:
        """The in-memory queue first, then the state file's; also the defaults (the file's
        override the constructor's)."""
        action, state = self._next_scripted(self._queue, Action, "script")
        defaults: dict[str, Any] = {"text": self.text, "delay": self.delay, "usage": self.usage}
        defaults.update({k: state[k] for k in ("text", "delay", "usage") if k in state})
        return action or ok(), defaults


def main(argv: list[str] | None = None) -> None:
    parser = server.arg_parser("Fake Anthropic Messages API")
    parser.add_argument("--text", default=None)
    parser.add_argument("--delay", type=float, default=0.0)
    server.serve_main(FakeAnthropic, argv, parser)


if __name__ == "__main__":
    main()
