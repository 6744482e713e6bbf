"""A local fake of the Anthropic Messages API, served over real HTTP (stdlib only).

In-process::

    with FakeAnthropic() as fake:
        fake.script(status(429, headers={"retry-after": "0"}), ok(text="hello"))
        client = anthropic.Anthropic(api_key="test", base_url=fake.url, max_retries=0)

Separate process (first stdout line is the URL; serves until killed)::

    python -m tests.fakes.anthropic_api --port 0 --state-file PATH

``write_script(PATH, [status(500)])`` scripts the next responses and ``read_requests(PATH)``
returns the requests logged (JSON lines) to ``PATH + ".log"``.

The Message Batches API is served too (``fake.batches``: tests/fakes/anthropic_batches.py).
A request with ``tools`` and ``tool_choice`` naming one of them is answered as the API
answers a forced tool call: one ``tool_use`` block whose ``input`` is the scripted text
when that text is a JSON object, else built from the tool's schema (each required array
property holding the text as its one part), and ``stop_reason`` ``tool_use``.

With ``count_tokens=True`` usage is counted from the request (4 characters a token) and a
system prompt marked with ``cache_control`` is cached as the API would: written by the
first request, read by the next within its TTL, if at least ``cache_min_tokens`` long.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import anthropic_batches, server
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
        path = self.path.split("?")[0].rstrip("/")
        if path.startswith(anthropic_batches.BATCHES_PATH):
            self._batch_reply(fake.batches.post(path, body), n)
            return
        if path != "/v1/messages":
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
        self._reply(200, fake._message(body, f"msg_fake{n:06d}", text, defaults), n)

    def do_GET(self) -> None:  # noqa: N802
        fake = self.server.fake
        n = fake._record(
            RecordedRequest("GET", self.path, self._lower_headers(), None, time.time())
        )
        path, _, query = self.path.partition("?")
        if path.startswith(anthropic_batches.BATCHES_PATH):
            self._batch_reply(fake.batches.get(path.rstrip("/"), query), n)
            return
        if path == MODELS_PATH:  # the cheap authenticated read `galley check --online` makes
            headers = self._lower_headers()  # the SDK sends the key as a bearer token
            sent = headers.get("x-api-key") or headers.get("authorization", "").removeprefix(
                "Bearer "
            )
            if sent == REFUSED_KEY:
                self._reply(401, error_body(401, "invalid x-api-key"), n)
            else:
                self._reply(200, MODELS_PAGE, n)
            return
        self._reply(404, error_body(404, f"no route GET {self.path}"), n)

    def _reply(
        self, code: int, payload: Any, n: int, headers: dict[str, str] | None = None
    ) -> None:
        """JSON with the request's `request-id` header, then any scripted `headers`."""
        self._send_json(code, payload, [("request-id", f"req_{n}"), *(headers or {}).items()])

    def _batch_reply(self, reply: anthropic_batches.Reply, n: int) -> None:
        if reply.cut is not None:  # the effect (if any) happened; the answer never comes
            self._close_after(reply.seconds if reply.cut == "hang" else 0)
            return
        if reply.error is not None:
            self._reply(reply.code, error_body(reply.code, reply.error), n, reply.headers)
        elif reply.jsonl:
            data = str(reply.payload).encode()
            self.send_response(reply.code)
            self.send_header("Content-Type", "application/binary")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", f"req_{n}")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        else:
            self._reply(reply.code, reply.payload, n, reply.headers)


def _validate(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    missing = [k for k in ("model", "max_tokens", "messages") if k not in body]
    if missing:
        return f"missing required field(s): {', '.join(missing)}"
    if not isinstance(body["messages"], list) or not body["messages"]:
        return "messages: must be a non-empty list"
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        return "max_tokens: must be at least 1"
    if body.get("stream"):
        return "the fake does not implement streaming"
    return _images_problem(body["messages"]) or _tools_problem(body)


IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def _images_problem(messages: list[Any]) -> str | None:
    """What the API refuses in an image content block (a base64 source): a media type
    other than the four it reads, in its pydantic wording."""
    for m, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for b, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict) or block.get("type") != "image":
                continue
            source = block.get("source") or {}
            where = f"messages.{m}.content.{b}.image.source.base64"
            if source.get("type") != "base64":
                continue  # url and file sources: Galley sends neither
            if source.get("media_type") not in IMAGE_MEDIA_TYPES:
                return (
                    f"{where}.media_type: Input should be 'image/jpeg', 'image/png', "
                    "'image/gif' or 'image/webp'"
                )
            if not isinstance(source.get("data"), str) or not source["data"]:
                return f"{where}.data: Field required"
    return None


TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


def _tools_problem(body: dict[str, Any]) -> str | None:
    """What the API refuses in `tools` and `tool_choice` (the parts Galley sends)."""
    tools = body.get("tools", [])
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    names = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not TOOL_NAME.match(str(tool.get("name", ""))):
            return f"tools.{index}.name: String should match pattern '{TOOL_NAME.pattern}'"
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return f"tools.{index}.input_schema.type: Input should be 'object'"
        names.append(tool["name"])
    choice = body.get("tool_choice")
    if (
        isinstance(choice, dict)
        and choice.get("type") == "tool"
        and choice.get("name") not in names
    ):
        return f"tool_choice.name: Tool '{choice.get('name')}' not found in tools"
    return None


def _forced_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The tool a request forces (`tool_choice` of type `tool`), if any."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("type") != "tool":
        return None
    return next(t for t in body["tools"] if t["name"] == choice["name"])


def tool_input(tool: dict[str, Any], text: str) -> dict[str, Any]:
    """A forced tool call's input: `text` itself when it is a JSON object, else built from
    the schema (arrays hold `text` as one part; objects recurse over required keys)."""
    try:
        scripted = json.loads(text)
    except ValueError:
        scripted = None
    if isinstance(scripted, dict):
        return scripted
    built = _from_schema(tool["input_schema"], text)
    return built if isinstance(built, dict) else {}


def _from_schema(schema: dict[str, Any], text: str) -> Any:
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {key: _from_schema(props.get(key, {}), text) for key in schema.get("required", [])}
    if kind == "array":
        return [_from_schema(schema.get("items", {}), text)]
    return text


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


def count_tokens(text: str) -> int:
    """The fake's tokenizer: 4 characters a token, at least 1 for any text."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _system_blocks(system: Any) -> list[dict[str, Any]]:
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return [b for b in system or [] if isinstance(b, dict)]


def _message_text(messages: list[Any]) -> str:
    parts = []
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [b.get("text", "") for b in content if isinstance(b, dict)]
    return "".join(parts)


CACHE_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


class PromptCache:
    """The API's prompt cache as far as Galley uses it: the system blocks up to the last
    one marked `cache_control`, cached per model if long enough, for its TTL from the
    last use."""

    def __init__(self, min_tokens: int) -> None:
        self.min_tokens = min_tokens
        self._until: dict[tuple[str, str], float] = {}  # (model, prefix) -> expiry

    def usage(self, body: dict[str, Any], output: str, tier: str) -> dict[str, Any]:
        blocks = _system_blocks(body.get("system"))
        marked = [i for i, b in enumerate(blocks) if b.get("cache_control")]
        total = count_tokens("".join(b.get("text", "") for b in blocks))
        total += count_tokens(_message_text(body["messages"]))
        written = {"5m": 0, "1h": 0}
        read = 0
        if marked:
            last = marked[-1]
            prefix = "".join(b.get("text", "") for b in blocks[: last + 1])
            ttl = str(blocks[last]["cache_control"].get("ttl", "5m"))
            size = count_tokens(prefix)
            if size >= self.min_tokens:
                key, now = (str(body["model"]), prefix), time.monotonic()
                if self._until.get(key, 0.0) > now:
                    read = size
                else:
                    written[ttl] = size
                self._until[key] = max(self._until.get(key, 0.0), now + CACHE_TTL_SECONDS[ttl])
        cached = read + written["5m"] + written["1h"]
        return {
            "input_tokens": total - cached,
            "output_tokens": count_tokens(output),
            "cache_creation_input_tokens": written["5m"] + written["1h"],
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
            "service_tier": tier,
        }


MODELS_PATH = "/v1/models"
REFUSED_KEY = "sk-ant-refused"  # the one key the fake answers 401 authentication_error
MODELS_PAGE = {  # GET /v1/models?limit=1, as the API lists its newest model
    "data": [
        {
            "type": "model",
            "id": "claude-test",
            "display_name": "Claude Test",
            "created_at": "2026-01-01T00:00:00Z",
        }
    ],
    "has_more": True,
    "first_id": "claude-test",
    "last_id": "claude-test",
}


class FakeAnthropic(server.FakeServer):
    """The fake server. Use as a context manager, or call start()/stop()."""

    handler_class = _Handler

    def __init__(
        self,
        *,
        text: str | None = None,
        usage: dict[str, int] | None = None,
        delay: float = 0.0,
        count_tokens: bool = False,
        cache_min_tokens: int = 1024,
        state_file: str | os.PathLike[str] | None = None,
        port: int = 0,
    ) -> None:
        super().__init__(state_file=state_file, port=port)
        self.text = text  # default reply text; None means "Draft for: <last user text>"
        self.usage = dict(usage or {})  # overrides merged into DEFAULT_USAGE
        self.delay = delay  # default seconds before answering
        self.count_tokens = count_tokens  # usage counted from the request, prompt cache too
        self.prompt_cache = PromptCache(cache_min_tokens)
        self._queue: deque[Action] = deque()
        self._entries_answered = 0
        self.batches = anthropic_batches.BatchBook(self, self._batch_answer)

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
        return action or ok(), self._defaults(state)

    def _defaults(self, state: dict[str, Any]) -> dict[str, Any]:
        defaults: dict[str, Any] = {"text": self.text, "delay": self.delay, "usage": self.usage}
        defaults.update({k: state[k] for k in ("text", "delay", "usage") if k in state})
        return defaults

    def _message(
        self,
        body: Any,
        message_id: str,
        text: str | None,
        defaults: dict[str, Any],
        tier: str = "standard",
    ) -> dict[str, Any]:
        """The Message JSON answering a valid request `body`."""
        if text is None:
            text = "Draft for: " + _last_user_text(body["messages"])
        if self.count_tokens:
            with self._lock:
                usage = self.prompt_cache.usage(body, text, tier)
        else:
            usage = {**DEFAULT_USAGE, **defaults.get("usage", {})}
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        stop_reason = "end_turn"
        tool = _forced_tool(body)
        if tool is not None:  # a forced tool call: one tool_use block, no text
            block_id = f"toolu_{message_id.removeprefix('msg_')}"
            content = [
                {
                    "type": "tool_use",
                    "id": block_id,
                    "name": tool["name"],
                    "input": tool_input(tool, text),
                }
            ]
            stop_reason = "tool_use"
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

    def _batch_answer(self, params: Any, text: str | None) -> dict[str, Any] | str:
        """One batch entry answered as /v1/messages would, or why its params are invalid."""
        problem = _validate(params)
        if problem:
            return problem
        state = server.read_state(self.state_file) if self.state_file is not None else {}
        defaults = self._defaults(state)
        with self._lock:
            self._entries_answered += 1
            message_id = f"msg_fakebatch{self._entries_answered:06d}"
        return self._message(params, message_id, text or defaults.get("text"), defaults, "batch")


def main(argv: list[str] | None = None) -> None:
    parser = server.arg_parser("Fake Anthropic Messages API")
    parser.add_argument("--text", default=None)
    parser.add_argument("--delay", type=float, default=0.0)
    server.serve_main(FakeAnthropic, argv, parser)


if __name__ == "__main__":
    main()
