"""A realistic history, bulk-loaded: what a team with 50 hourly recipes has after years.

Rows go in with `executemany` (SQLite) or `COPY` (PostgreSQL), never through the ORM one
by one. The history is settled: every run is final except each recipe's two newest,
which wait for review with their messages posted, so a periodic pass has nothing to do.
Used by `bench/history_scale.py` and by the query-plan test on a small seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from core.identity import attempt_id, draft_key, payload_hash, review_effect_key, run_id, text_hash
from core.store.engine import Store

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # a fixed end for tests with a frozen clock
RECIPES = 50
PLATFORM = "linkedin"
REVIEW_CHANNEL = "C0REVIEW"
TARGET = "webhook"
WAITING_PER_RECIPE = 2  # the newest runs of each recipe wait for review
SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"
# Final states of older runs, by weight (a few years of hourly drafting).
RUN_MIX = (
    ("succeeded", 60),
    ("skipped", 15),
    ("expired", 10),
    ("rejected", 8),
    ("failed", 5),
    ("cancelled", 2),
)
SKIP_REASONS = ("misfire", "backpressure", "overlap", "paused")
FAIL_REASONS = ("invalid_request", "attempts_exhausted", "deadline_exceeded")
DECIDED_DRAFT = {"succeeded": "published", "expired": "expired", "rejected": "rejected"}


def recipe_name(index: int) -> str:
    return f"recipe-{index:02d}"


def config_text(recipes: int = RECIPES, pending_limit: int = 3) -> str:
    """Hourly recipes in UTC, each publishing to a webhook nobody calls in a bench."""
    head = (
        f'[slack]\nreview_channel = "{REVIEW_CHANNEL}"\n\n[defaults]\ntimezone = "UTC"\n'
        f'model = "claude-bench"\npending_limit = {pending_limit}\n'
    )
    body = "".join(
        f'\n[[recipes]]\nname = "{recipe_name(i)}"\nplatform = "{PLATFORM}"\n'
        f'schedule = "{i % 60} * * * *"\nprompt = "Write the update for {{slot:%d %B %Y}}."\n'
        'publish = { to = "webhook", url = "http://127.0.0.1:9/publish" }\n'
        for i in range(recipes)
    )
    return head + body


@dataclass
class Rows:
    """One recipe's history, as column dicts per table."""

    recipes: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    drafts: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    effects: list[dict[str, Any]] = field(default_factory=list)

    def tables(self) -> list[tuple[str, list[dict[str, Any]]]]:
        return [
            ("recipes", self.recipes),
            ("runs", self.runs),
            ("drafts", self.drafts),
            ("attempts", self.attempts),
            ("effects", self.effects),
        ]


def history(
    total_runs: int, recipes: int = RECIPES, seed: int = 14, now: datetime = NOW
) -> Iterator[Rows]:
    """`total_runs` runs spread over `recipes` recipes, newest first, one recipe at a time,
    the newest an hour before `now`."""
    rng = random.Random(seed)
    per_recipe = max(WAITING_PER_RECIPE + 1, total_runs // recipes)
    states = [s for s, _ in RUN_MIX]
    weights = [w for _, w in RUN_MIX]
    for index in range(recipes):
        rows = Rows()
        name = recipe_name(index)
        rows.recipes.append(_recipe(name, now))
        newest = now.replace(minute=index % 60) - timedelta(hours=1)
        for age in range(per_recipe):
            slot = newest - timedelta(hours=age)
            state = "awaiting_review" if age < WAITING_PER_RECIPE else None
            state = state or rng.choices(states, weights)[0]
            _add_run(rows, rng, name, slot, state, now)
        yield rows


def _recipe(name: str, now: datetime) -> dict[str, Any]:
    return {
        "name": name,
        "version": 1,
        "paused": False,
        "paused_reason": None,
        "changed_by": None,
        "backpressure_since": None,
        "backpressure_resumed_at": None,
        "updated_at": now - timedelta(days=900),
    }


def _add_run(
    rows: Rows, rng: random.Random, recipe: str, slot: datetime, state: str, now: datetime
) -> None:
    wall = slot.replace(tzinfo=None)
    rid = run_id(recipe, wall)
    key = draft_key(PLATFORM, rid, 1)
    finished = slot + timedelta(minutes=rng.randint(2, 50))
    drafted = state not in ("skipped", "cancelled")
    reason = None
    if state == "skipped":
        reason = rng.choice(SKIP_REASONS)
    elif state == "failed":
        reason = rng.choice(FAIL_REASONS)
    rows.runs.append(
        {
            "id": rid,
            "recipe": recipe,
            "slot_wall": rid.partition("@")[2],
            "slot_at": slot,
            "state": state,
            "reason": reason,
            "version": 1,
            "draft_key": key if drafted else None,
            "manual": False,
            "created_at": slot,
            "updated_at": min(finished, now),
        }
    )
    if not drafted:
        return
    rows.attempts.append(_attempt(rid, recipe, key, slot, ok=state != "failed"))
    if state == "failed":  # people were told at the time (core/operations/alerts.py's key)
        told = min(finished, now)
        alert = f"alert|{rid}|failed|{told.isoformat()}"
        rows.effects.append(_receipt(alert, key, "alert", told, {"run": rid}))
        return  # a failed draft gives its claim back: no draft row
    draft_state = DECIDED_DRAFT.get(state, "ready")
    rows.drafts.append(_draft(rid, recipe, key, slot, draft_state, min(finished, now)))
    rows.effects.append(_receipt(review_effect_key(key), key, "review", slot, _review(key)))
    if draft_state != "ready":
        shown = "approved" if draft_state == "published" else draft_state
        update_key = f"{review_effect_key(key)}-update:{shown}:1"
        payload = {"channel": REVIEW_CHANNEL, "ts": _ts(slot), "state": shown}
        rows.effects.append(_receipt(update_key, key, "review-update", finished, payload))
    if draft_state == "published":
        publish_key = f"{key}|publish:{TARGET}"
        payload = {"target": TARGET, "draft_key": key, "text": text_hash(_text(rid))}
        rows.effects.append(_receipt(publish_key, key, "publish", finished, payload))


def _text(rid: str) -> str:
    return f"This week at the company ({rid}): three launches, one hire, and a thank-you."


def _ts(slot: datetime) -> str:
    return f"{slot.timestamp():.6f}"


def _review(key: str) -> dict[str, Any]:
    return {"channel": REVIEW_CHANNEL, "draft_key": key}


def _attempt(rid: str, recipe: str, key: str, slot: datetime, *, ok: bool) -> dict[str, Any]:
    return {
        "id": attempt_id(rid, 1),
        "run_id": rid,
        "recipe": recipe,
        "draft_key": key,
        "number": 1,
        "worker": "bench:1:000000",
        "model": "claude-bench",
        "started_at": slot,
        "finished_at": slot + timedelta(seconds=4),
        "outcome": "ok" if ok else "invalid_request",
        "http_status": None if ok else 400,
        "error": None if ok else "400 invalid_request_error",
        "request_id": None,
        "stop_reason": "end_turn" if ok else None,
        "input_tokens": 120,
        "output_tokens": 340 if ok else 0,
        "cache_creation_tokens": 0,
        "cache_read_tokens": 0,
        "latency_ms": 4000,
    }


def _draft(
    rid: str, recipe: str, key: str, slot: datetime, state: str, decided: datetime
) -> dict[str, Any]:
    ready_at = slot + timedelta(seconds=5)
    waiting = state == "ready"
    text = _text(rid)
    return {
        "key": key,
        "run_id": rid,
        "recipe": recipe,
        "platform": PLATFORM,
        "version": 1,
        "state": state,
        "claimed_by": None,
        "lease_until": None,
        "text": text,
        "revision": 1,
        "text_hash": text_hash(text),
        "model": "claude-bench",
        "input_tokens": 120,
        "output_tokens": 340,
        "ready_at": ready_at,
        "decided_by": None if waiting or state == "expired" else "U0EDITOR",
        "decided_at": None if waiting or state == "expired" else decided,
        "decision_reason": None,
        "created_at": slot,
        "updated_at": ready_at if waiting else decided,
        # What the review message shows (the outbox's marker): settled, so the draft's own.
        "shown_state": state,
        "shown_revision": 1,
    }


def _receipt(key: str, draft: str, step: str, at: datetime, payload: Any) -> dict[str, Any]:
    return {
        "key": key,
        "draft_key": draft,
        "step": step,
        "payload_hash": payload_hash(payload),
        "state": "succeeded",
        "external_id": _ts(at),
        "result": json.dumps({"channel": REVIEW_CHANNEL, "ts": _ts(at)}, sort_keys=True),
        "detail": None,
        "claimed_by": None,
        "lease_until": None,
        "tries": 1,
        "created_at": at,
        "updated_at": at,
    }


def load(
    store: Store, total_runs: int, recipes: int = RECIPES, now: datetime = NOW
) -> dict[str, int]:
    """Bulk-load the history, ending at `now`, into a migrated, empty database; returns
    rows per table."""
    counts: dict[str, int] = {}
    columns = {t: [c["name"] for c in sa.inspect(store.engine).get_columns(t)] for t in _TABLES}
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        if store.dialect == "sqlite":
            cursor.execute("PRAGMA synchronous=OFF")
        indexes = _drop_indexes(store.dialect, cursor)  # built once at the end: faster
        raw.commit()
        for rows in history(total_runs, recipes, now=now):
            for table, batch in rows.tables():
                _insert(store.dialect, cursor, table, columns[table], batch)
                counts[table] = counts.get(table, 0) + len(batch)
            raw.commit()
        for definition in indexes:
            cursor.execute(definition)
        raw.commit()
        cursor.execute("ANALYZE")
        raw.commit()
        if store.dialect == "sqlite":  # start from an empty WAL, as a running bot would
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        raw.close()
    return counts


_TABLES = ("recipes", "runs", "drafts", "attempts", "effects")


def _drop_indexes(dialect: str, cursor: Any) -> list[str]:
    """Drop the history tables' secondary indexes (the migrations' own, read back from
    the database) and return the statements that build them again."""
    tables = ", ".join(f"'{t}'" for t in _TABLES)
    if dialect == "sqlite":
        cursor.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
            f" AND tbl_name IN ({tables})"
        )
    else:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes i WHERE schemaname = current_schema()"
            f" AND tablename IN ({tables}) AND NOT EXISTS"
            " (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)"
        )
    found = [(str(name), str(definition)) for name, definition in cursor.fetchall()]
    for name, _ in found:
        cursor.execute(f'DROP INDEX "{name}"')
    return [definition for _, definition in found]


def _insert(
    dialect: str, cursor: Any, table: str, columns: Sequence[str], batch: list[dict[str, Any]]
) -> None:
    if not batch:
        return
    names = [c for c in columns if c in batch[0]]
    if dialect == "sqlite":
        marks = ", ".join("?" for _ in names)
        cursor.executemany(
            f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})",
            [tuple(_sqlite(row[c]) for c in names) for row in batch],
        )
        return
    with cursor.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN") as copy:
        for row in batch:
            copy.write_row(tuple(row[c] for c in names))


def _sqlite(value: Any) -> Any:
    """The text SQLAlchemy's SQLite DateTime stores (naive UTC), so comparisons hold."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None).strftime(SQLITE_TIME)
    return value
