"""A known, seeded history written straight into the tables, for plot tests and the
notebook benchmark: recipes, runs (drafted or skipped), drafts that were approved,
rejected, expired or are still waiting, the events of each change, and the model calls.

Rows are consistent with what Galley itself writes (the same states, the same event
shape), bulk-inserted so 100,000 runs take seconds, not the hours real drafting would.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from core.models import AttemptRow, DraftRow, EventRow, RecipeRow, RunRow
from core.store.engine import Store

RECIPES = ("weekly-update", "daily-tip", "release-notes")
SKIP_REASONS = ("backpressure", "paused", "misfire")
OUTCOMES = ("approved", "published", "rejected", "expired", "ready")
MODEL = "claude-sonnet-test"
PENDING_LIMITS = {"weekly-update": 3, "daily-tip": 5, "release-notes": 2}
CONFIG = """
[slack]
review_channel = "C0REVIEW"
approvers = ["U0EDITOR"]
admins = ["U0ADMIN"]

[defaults]
timezone = "UTC"
model = "claude-sonnet-test"
""" + "".join(
    f"""
[[recipes]]
name = "{name}"
platform = "linkedin"
schedule = "0 9 * * *"
pending_limit = {limit}
system = "You write concise updates."
prompt = "Write the {name} for {{slot:%d %B %Y}}."
"""
    for name, limit in PENDING_LIMITS.items()
)
BATCH = 5_000


@dataclass
class History:
    """What was written, for tests that compare with the database."""

    runs: int = 0
    drafts: int = 0
    start: datetime | None = None
    run_ids: list[str] = field(default_factory=list)


def seed_history(store: Store, *, runs: int, start: datetime, seed: int = 7) -> History:
    """`runs` runs, one every 2 hours from `start`, spread over RECIPES."""
    rng = random.Random(seed)
    history = History(start=start)
    tables: dict[Any, list[dict[str, Any]]] = {
        RunRow: [],
        DraftRow: [],
        EventRow: [],
        AttemptRow: [],
    }
    with store.transaction() as session:
        session.execute(
            sa.insert(RecipeRow),
            [{"name": name, "version": 1, "updated_at": start} for name in RECIPES],
        )
    for number in range(runs):
        recipe = RECIPES[number % len(RECIPES)]
        slot_at = start + timedelta(hours=2 * number)
        _one_run(tables, rng, recipe, slot_at, history)
        if len(tables[EventRow]) >= BATCH:
            _flush(store, tables)
    _flush(store, tables)
    return history


def _one_run(
    tables: dict[Any, list[dict[str, Any]]],
    rng: random.Random,
    recipe: str,
    slot_at: datetime,
    history: History,
) -> None:
    slot_wall = slot_at.strftime("%Y-%m-%dT%H:%M")
    run_id = f"{recipe}@{slot_wall}"
    history.runs += 1
    history.run_ids.append(run_id)
    run = {
        "id": run_id,
        "recipe": recipe,
        "slot_wall": slot_wall,
        "slot_at": slot_at,
        "version": 1,
        "manual": False,
        "created_at": slot_at,
        "updated_at": slot_at,
        "reason": None,
        "draft_key": None,
    }
    event = _events(tables, run_id)
    event(slot_at, "run", run_id, None, "pending", "scheduler")
    if rng.random() < 0.2:
        reason = rng.choice(SKIP_REASONS)
        tables[RunRow].append(run | {"state": "skipped", "reason": reason})
        event(slot_at, "run", run_id, "pending", "skipped", "scheduler", reason)
        return
    key = f"linkedin|{run_id}|v1"
    ready_at = slot_at + timedelta(minutes=rng.randint(1, 5))
    outcome = rng.choice(OUTCOMES)
    decided_at = ready_at + timedelta(minutes=rng.randint(5, 47 * 60))
    if outcome == "expired":
        decided_at = ready_at + timedelta(hours=48)
    tokens_in, tokens_out = rng.randint(200, 800), rng.randint(100, 600)
    failed_first = rng.random() < 0.1
    for attempt in range(1, 3 if failed_first else 2):
        ok = attempt == 2 or not failed_first
        tables[AttemptRow].append(
            {
                "id": f"{run_id}#{attempt}",
                "run_id": run_id,
                "recipe": recipe,
                "draft_key": key,
                "number": attempt,
                "worker": "seed",
                "model": MODEL,
                "started_at": slot_at,
                "finished_at": ready_at,
                "outcome": "ok" if ok else "rejected_retryable",
                "http_status": None if ok else 529,
                "error": None if ok else "overloaded",
                "input_tokens": tokens_in if ok else 0,
                "output_tokens": tokens_out if ok else 0,
                "cache_creation_tokens": 0,
                "cache_read_tokens": 0,
                "latency_ms": 900,
            }
        )
    event(slot_at, "run", run_id, "pending", "running", "seed")
    event(slot_at, "draft", key, None, "claimed", "seed")
    event(ready_at, "draft", key, "claimed", "ready", "seed")
    event(ready_at, "run", run_id, "running", "awaiting_review", "seed")
    decided = outcome in ("approved", "published", "rejected")
    draft_state = outcome
    if outcome in ("approved", "published"):
        event(decided_at, "draft", key, "ready", "approved", "U0EDITOR")
        if outcome == "published":
            event(decided_at, "draft", key, "approved", "published", "publisher")
        run_state = "succeeded"
    elif outcome == "rejected":
        event(decided_at, "draft", key, "ready", "rejected", "U0EDITOR")
        run_state = "rejected"
    elif outcome == "expired":
        event(decided_at, "draft", key, "ready", "expired", "expiry")
        run_state = "expired"
    else:
        run_state = "awaiting_review"
    tables[RunRow].append(run | {"state": run_state, "draft_key": key})
    tables[DraftRow].append(
        {
            "key": key,
            "run_id": run_id,
            "recipe": recipe,
            "platform": "linkedin",
            "version": 1,
            "state": draft_state,
            "text": f"Seeded draft for {run_id}",
            "revision": 1,
            "text_hash": "0" * 64,
            "model": MODEL,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "ready_at": ready_at,
            "decided_by": "U0EDITOR" if decided else None,
            "decided_at": decided_at if decided else None,
            "created_at": slot_at,
            "updated_at": decided_at if outcome != "ready" else ready_at,
        }
    )
    history.drafts += 1


def _events(tables: dict[Any, list[dict[str, Any]]], run_id: str) -> Any:
    def event(
        at: datetime,
        subject: str,
        subject_id: str,
        from_state: str | None,
        to_state: str,
        actor: str,
        reason: str | None = None,
    ) -> None:
        tables[EventRow].append(
            {
                "at": at,
                "subject": subject,
                "subject_id": subject_id,
                "run_id": run_id,
                "from_state": from_state,
                "to_state": to_state,
                "actor": actor,
                "reason": reason,
            }
        )

    return event


def _flush(store: Store, tables: dict[Any, list[dict[str, Any]]]) -> None:
    """Parents first: runs, then drafts, then the rows that point at them."""
    with store.transaction() as session:
        for table in (RunRow, DraftRow, AttemptRow, EventRow):
            if tables[table]:
                session.execute(sa.insert(table), tables[table])
                tables[table].clear()
