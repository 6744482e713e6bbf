"""The Message Batches part of the fake Anthropic API (stdlib only): `FakeAnthropic` serves
it under ``/v1/messages/batches`` beside ``/v1/messages``, so one SDK client uses both.

    create   POST /v1/messages/batches            400 for a bad or repeated custom_id
    retrieve GET  /v1/messages/batches/{id}       in_progress | canceling | ended
    list     GET  /v1/messages/batches            newest first; after_id, before_id, limit
    results  GET  /v1/messages/batches/{id}/results   JSONL, shuffled, once ended
    cancel   POST /v1/messages/batches/{id}/cancel

A batch ends at the first look (a retrieve, or a list showing it) after its creation
unless told otherwise: ``looks=N`` answers in_progress N more times, ``hold`` keeps every
batch in progress until `release()`. Entries are answered as ``/v1/messages`` would be,
in request order (so a prompt cache marked by one entry is read by the next), unless
their custom_id is scripted (`errored()`, `expired()`, `canceled()`, `succeeded(text)`).
Each entry's params are checked only when the batch ends, as the real API does: a bad
one comes back errored, not as a 400 on create.

In-process: ``fake.batches.script(accept_then_drop())``, ``fake.batches.creates``. With a
state file: ``write_state(PATH, batch_script=[status(529)], batch_hold=True)``, and
``read_batches(PATH)`` returns what the fake created, kept across its restarts.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from tests.fakes import server
from tests.fakes.server import RecordedRequest

BATCHES_PATH = "/v1/messages/batches"
BATCHES_SUFFIX = ".batches.json"  # the batches created, kept across restarts
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
LIFETIME_SECONDS = 24 * 3600  # a batch expires 24 hours after its creation
MAX_LIST_LIMIT = 1000
# What answers one entry: (params, text or None for the default) -> the Message JSON, or
# the reason the params are invalid.
Answer = Callable[[Any, str | None], "dict[str, Any] | str"]


@dataclass(frozen=True)
class Action(server.ScriptedAction):
    """One scripted outcome of one create. Build with the functions below."""

    kind: str  # "accept" | "status" | "drop" | "hang_before" | "accept_then_drop" | ...
    code: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    looks: int | None = None  # in_progress answers before the batch ends (None: the default)


def accept(looks: int | None = None) -> Action:
    """Create the batch normally (a placeholder to script a fault for a later create)."""
    return Action("accept", looks=looks)


def status(code: int, headers: dict[str, str] | None = None) -> Action:
    """Answer `code` with Anthropic-shaped error JSON (529: overloaded); nothing created."""
    return Action("status", code=code, headers=dict(headers or {}))


def drop() -> Action:
    """Nothing created; close the socket without an answer."""
    return Action("drop")


def hang_before(seconds: float = 30.0) -> Action:
    """Nothing created; send nothing for `seconds` (or until stop), then close."""
    return Action("hang_before", seconds=seconds)


def accept_then_drop(looks: int | None = None) -> Action:
    """Create the batch, then close the socket without an answer: the lost create."""
    return Action("accept_then_drop", looks=looks)


def accept_then_hang(seconds: float = 30.0, looks: int | None = None) -> Action:
    """Create the batch, then send nothing for `seconds` (or until stop) and close."""
    return Action("accept_then_hang", seconds=seconds, looks=looks)


@dataclass(frozen=True)
class EntryOutcome(server.ScriptedAction):
    """How one entry (by custom_id) comes back when its batch ends."""

    kind: str  # "succeeded" | "errored" | "canceled" | "expired"
    text: str | None = None
    error_type: str = "api_error"
    message: str | None = None


def succeeded(text: str | None = None) -> EntryOutcome:
    return EntryOutcome("succeeded", text=text)


def errored(error_type: str = "api_error", message: str | None = None) -> EntryOutcome:
    """An error result: `error_type` as the API spells it (invalid_request_error, ...)."""
    return EntryOutcome("errored", error_type=error_type, message=message)


def canceled() -> EntryOutcome:
    return EntryOutcome("canceled")


def expired() -> EntryOutcome:
    return EntryOutcome("expired")


@dataclass(frozen=True)
class Reply:
    """What the handler sends for one batches request."""

    code: int
    payload: Any = None  # the JSON body; the JSONL text when `jsonl`
    error: str | None = None  # an Anthropic-shaped error with this message instead
    jsonl: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    cut: str | None = None  # "drop" | "hang": no answer at all, after `seconds`
    seconds: float = 0.0


@dataclass
class Batch:
    """One created batch as the fake keeps it (JSON-able, saved to the state file)."""

    id: str
    seq: int
    created_at: float
    requests: list[dict[str, Any]]
    looks_left: int
    status: str = "in_progress"
    ended_at: float | None = None
    cancel_initiated_at: float | None = None
    released: bool = False
    expired: bool = False
    results: list[dict[str, Any]] | None = None  # the JSONL entries, once ended

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        if self.results is None:
            counts["processing"] = len(self.requests)
        for entry in self.results or []:
            counts[entry["result"]["type"]] += 1
        return counts


# --- cross-process state file -------------------------------------------------------------


def write_state(path: str | os.PathLike[str], **kwargs: Any) -> None:
    """Replace the given keys of the state file: `batch_script` ([Action, ...], one per
    create, after the in-memory queue), `entry_results` ({custom_id: EntryOutcome}),
    `batch_looks` (the default in_progress answers per batch) and `batch_hold` (bool)."""
    if "batch_script" in kwargs:
        kwargs["batch_script"] = [_json(a) for a in kwargs["batch_script"]]
    if "entry_results" in kwargs:
        kwargs["entry_results"] = {k: _json(v) for k, v in kwargs["entry_results"].items()}
    server.update_state(path, kwargs)


def read_batches(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The batches a fake using this state file created, oldest first, as last saved."""
    return list(server.read_saved(path, BATCHES_SUFFIX).get("batches", []))


def _json(item: Any) -> Any:
    return item.to_json() if isinstance(item, server.ScriptedAction) else item


# --- the book of batches ------------------------------------------------------------------


class BatchBook:
    """The batches of one fake server and the rules they follow; the handler asks it."""

    def __init__(self, fake: server.FakeServer, answer: Answer, *, seed: int = 0) -> None:
        self._fake = fake
        self._answer = answer
        self._random = random.Random(seed)
        self._queue: deque[Action] = deque()
        self._entry_results: dict[str, EntryOutcome] = {}
        self._batches: dict[str, Batch] = {}
        self.looks = 0  # default in_progress answers of a new batch after its creation
        self.hold = False  # True: no batch ends until released (or cancelled, or expired)
        self.now: Callable[[], float] = time.time  # the fake's clock for created_at, ended_at
        if fake.state_file is not None:
            saved = server.read_saved(fake.state_file, BATCHES_SUFFIX).get("batches", [])
            self._batches = {b["id"]: Batch(**b) for b in saved}

    # --- what tests use ---

    def script(self, *actions: Action) -> None:
        """Append create outcomes to the FIFO queue; each create consumes one."""
        with self._fake._lock:
            self._queue.extend(actions)

    def script_entries(self, outcomes: dict[str, EntryOutcome]) -> None:
        """How these custom_ids come back, in whichever batch they are sent."""
        with self._fake._lock:
            self._entry_results.update(outcomes)

    def release(self, batch_id: str | None = None) -> None:
        """Let one held batch (or, with no id, every batch) end at its next look."""
        with self._fake._lock:
            if batch_id is None:
                self.hold = False
            else:
                self._batches[batch_id].released = True

    def expire(self, batch_id: str) -> None:
        """End a batch now as its 24 hours would: entries not scripted come back expired."""
        with self._fake._lock:
            batch = self._batches[batch_id]
            if batch.status != "ended":
                batch.expired = True
                self._end(batch)
                self._persist()

    @property
    def creates(self) -> list[RecordedRequest]:
        """Every create request received, whatever its fate."""
        with self._fake._lock:
            records = list(self._fake._records)
        return [r for r in records if r.method == "POST" and _route(r.path) == ("create", "")]

    @property
    def entries_sent(self) -> list[str]:
        """The custom_id of every entry of every create received, refused ones included."""
        return [
            str(request.get("custom_id"))
            for create in self.creates
            if isinstance(create.body, dict)
            for request in create.body.get("requests") or []
            if isinstance(request, dict)
        ]

    @property
    def created(self) -> list[Batch]:
        """The batches that exist, oldest first (copies)."""
        with self._fake._lock:
            return [Batch(**asdict(b)) for b in sorted(self._batches.values(), key=_seq)]

    # --- what the handler asks ---

    def post(self, path: str, body: Any) -> Reply:
        route, batch_id = _route(path)
        if route == "create":
            return self._create(body)
        if route == "cancel":
            return self._cancel(batch_id)
        return Reply(404, error=f"no route POST {path}")

    def get(self, path: str, query: str) -> Reply:
        route, batch_id = _route(path)
        if route == "create":  # the same path, GET: list
            return self._list(parse_qs(query))
        if route == "retrieve":
            return self._retrieve(batch_id)
        if route == "results":
            return self._results(batch_id)
        return Reply(404, error=f"no route GET {path}")

    # --- the rules ---

    def _create(self, body: Any) -> Reply:
        action, state = self._next_action()
        if action.kind == "status":
            return Reply(action.code, error=f"fake {action.code}", headers=action.headers)
        if action.kind in ("drop", "hang_before"):
            return Reply(
                0, cut="hang" if action.kind == "hang_before" else "drop", seconds=action.seconds
            )
        problem = _create_problem(body)
        if problem:
            return Reply(400, error=problem)
        looks = (
            action.looks if action.looks is not None else int(state.get("batch_looks", self.looks))
        )
        with self._fake._lock:
            seq = max((b.seq for b in self._batches.values()), default=0) + 1
            batch = Batch(
                id=f"msgbatch_fake{seq:06d}{self._random.getrandbits(40):010x}",
                seq=seq,
                created_at=self.now(),
                requests=list(body["requests"]),
                looks_left=looks,
            )
            self._batches[batch.id] = batch
            self._persist()
            shown = self._shown(batch)
        if action.kind == "accept_then_drop":
            return Reply(0, cut="drop")
        if action.kind == "accept_then_hang":
            return Reply(0, cut="hang", seconds=action.seconds)
        return Reply(200, shown)

    def _retrieve(self, batch_id: str) -> Reply:
        with self._fake._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return Reply(404, error=f"no batch {batch_id}")
            self._look(batch)
            return Reply(200, self._shown(batch))

    def _list(self, query: dict[str, list[str]]) -> Reply:
        after, before = _one(query, "after_id"), _one(query, "before_id")
        try:
            limit = int(_one(query, "limit") or 20)
        except ValueError:
            return Reply(400, error="limit: must be an integer")
        if not 1 <= limit <= MAX_LIST_LIMIT:
            return Reply(400, error=f"limit: must be between 1 and {MAX_LIST_LIMIT}")
        if after and before:
            return Reply(400, error="give after_id or before_id, not both")
        with self._fake._lock:
            newest_first = sorted(self._batches.values(), key=_seq, reverse=True)
            ids = [b.id for b in newest_first]
            cursor = after or before
            if cursor and cursor not in ids:
                page, has_more = [], False
            elif after:
                start = ids.index(after) + 1
                page, has_more = newest_first[start : start + limit], start + limit < len(ids)
            elif before:
                end = ids.index(before)
                page, has_more = newest_first[max(0, end - limit) : end], end - limit > 0
            else:
                page, has_more = newest_first[:limit], limit < len(ids)
            for batch in page:
                self._look(batch)
            data = [self._shown(b) for b in page]
        return Reply(
            200,
            {
                "data": data,
                "has_more": has_more,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            },
        )

    def _results(self, batch_id: str) -> Reply:
        with self._fake._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return Reply(404, error=f"no batch {batch_id}")
            if batch.results is None:
                return Reply(404, error=f"batch {batch_id} has not ended: no results yet")
            lines = "".join(json.dumps(entry) + "\n" for entry in batch.results)
        return Reply(200, lines, jsonl=True)

    def _cancel(self, batch_id: str) -> Reply:
        with self._fake._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return Reply(404, error=f"no batch {batch_id}")
            if batch.status == "in_progress":
                batch.status = "canceling"
                batch.cancel_initiated_at = self.now()
                self._persist()
            return Reply(200, self._shown(batch))

    def _look(self, batch: Batch) -> None:
        """Time passes for `batch` as someone looks at it (under the lock)."""
        if batch.status == "ended":
            return
        if batch.status == "in_progress":
            if self._held() and not batch.released:
                return
            if batch.looks_left > 0:
                batch.looks_left -= 1
                self._persist()
                return
        self._end(batch)
        self._persist()

    def _held(self) -> bool:
        if self._fake.state_file is not None:
            state = server.read_state(self._fake.state_file)
            if "batch_hold" in state:
                return bool(state["batch_hold"])
        return self.hold

    def _end(self, batch: Batch) -> None:
        """Answer every entry in request order, then shuffle them as the API may."""
        scripted = dict(self._entry_results)
        if self._fake.state_file is not None:
            saved = server.read_state(self._fake.state_file).get("entry_results") or {}
            scripted |= {k: EntryOutcome.from_json(v) for k, v in saved.items()}
        results = [self._entry(batch, request, scripted) for request in batch.requests]
        random.Random(batch.id).shuffle(results)
        batch.results = results
        batch.status = "ended"
        batch.ended_at = self.now()

    def _entry(
        self, batch: Batch, request: dict[str, Any], scripted: dict[str, EntryOutcome]
    ) -> dict[str, Any]:
        custom_id = request["custom_id"]
        outcome = scripted.get(custom_id)
        if outcome is None and batch.status == "canceling":
            outcome = canceled()
        if outcome is None and batch.expired:
            outcome = expired()
        outcome = outcome or succeeded()
        if outcome.kind == "succeeded":
            message = self._answer(request.get("params"), outcome.text)
            if isinstance(message, str):
                outcome = errored("invalid_request_error", message)
            else:
                return {"custom_id": custom_id, "result": {"type": "succeeded", "message": message}}
        if outcome.kind == "errored":
            error = {"type": outcome.error_type, "message": outcome.message or "fake entry error"}
            result = {"type": "errored", "error": {"type": "error", "error": error}}
            return {"custom_id": custom_id, "result": result}
        return {"custom_id": custom_id, "result": {"type": outcome.kind}}

    def _shown(self, batch: Batch) -> dict[str, Any]:
        """The MessageBatch JSON the API would answer now."""
        ended = batch.status == "ended"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": batch.status,
            "request_counts": batch.counts(),
            "created_at": _iso(batch.created_at),
            "expires_at": _iso(batch.created_at + LIFETIME_SECONDS),
            "ended_at": _iso(batch.ended_at),
            "cancel_initiated_at": _iso(batch.cancel_initiated_at),
            "archived_at": None,
            "results_url": f"{self._fake.url}{BATCHES_PATH}/{batch.id}/results" if ended else None,
        }

    def _next_action(self) -> tuple[Action, dict[str, Any]]:
        action, state = self._fake._next_scripted(self._queue, Action, "batch_script")
        return action or accept(), state

    def _persist(self) -> None:
        """Save every batch to the state file (under the fake's lock)."""
        self._fake._save(BATCHES_SUFFIX, {"batches": [asdict(b) for b in self._batches.values()]})


def _create_problem(body: Any) -> str | None:
    """Why the API would refuse this create outright (400), if it would."""
    if not isinstance(body, dict) or not isinstance(body.get("requests"), list):
        return "requests: Field required"
    requests = body["requests"]
    if not requests:
        return "requests: List should have at least 1 item"
    seen: set[str] = set()
    for i, request in enumerate(requests):
        if not isinstance(request, dict) or not isinstance(request.get("params"), dict):
            return f"requests.{i}.params: Field required"
        custom_id = request.get("custom_id")
        if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
            return f"requests.{i}.custom_id: String should match pattern '{CUSTOM_ID.pattern}'"
        if custom_id in seen:
            return f"requests.{i}.custom_id: duplicate custom_id {custom_id!r} in this batch"
        seen.add(custom_id)
    return None


def _route(path: str) -> tuple[str, str]:
    """("create" | "retrieve" | "results" | "cancel" | "", batch id) for a request path."""
    rest = path.split("?")[0].rstrip("/").removeprefix(BATCHES_PATH)
    parts = rest.split("/")
    if rest == "":
        return "create", ""
    if len(parts) == 2 and parts[1]:
        return "retrieve", parts[1]
    if len(parts) == 3 and parts[2] in ("results", "cancel"):
        return parts[2], parts[1]
    return "", ""


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _seq(batch: Batch) -> int:
    return batch.seq


def _iso(at: float | None) -> str | None:
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
