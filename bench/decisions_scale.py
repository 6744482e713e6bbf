"""What the decision log costs at a million decisions, on SQLite and PostgreSQL.

Bulk-loads `--decisions` decision events (five per draft: an edit, a redraft, two
approvals, an unapprove) among as many events that are no decision (claims, state
changes), over 20 recipes, then times `g.decisions()` as `galley decisions` calls it:
the newest 100, a page deep in the history, one recipe's newest 100, and `--since` the
last day. Each should cost the rows it returns, not the history. Exits 1 past a goal:

    .venv/bin/python -m bench.decisions_scale [--decisions 1000000] [--database-url URL]

PostgreSQL runs when `--database-url` or GALLEY_TEST_DATABASE_URL names a server: a
database `galley_bench_decisions_<pid>` is created there and dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.scratch_db import scratch_postgres
from core.api.decisions import read_decisions
from core.identity import draft_key, run_id, text_hash
from core.models import DraftRow, EventRow, RecipeRow, RunRow
from core.setup.config import Config, parse_config
from core.store.engine import Store

RECIPES = 20
PER_DRAFT = ("edit", "redraft", "approval", "approval", "unapprove")
NOW = datetime(2026, 12, 1, tzinfo=UTC)
CHUNK = 20_000
GOAL_MS = 50.0  # median of each read of a page of 100
GOAL_MS_PER_ROW = 0.2  # median of `--since`, per row it returns


def recipe_name(index: int) -> str:
    return f"recipe-{index:02d}"


def config() -> Config:
    recipes = "".join(
        f'\n[[recipes]]\nname = "{recipe_name(i)}"\nplatform = "linkedin"\n'
        'schedule = "0 * * * *"\nsystem = "s"\nprompt = "p"\n'
        for i in range(RECIPES)
    )
    return parse_config(f'[slack]\nreview_channel = "C0R"\n[defaults]\nmodel = "m"\n{recipes}')


def history(decisions: int) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """Chunks of rows, table by table: recipes, then runs with their drafts, then events."""
    yield RecipeRow.__table__, [{"name": recipe_name(i), "updated_at": NOW} for i in range(RECIPES)]
    drafts = decisions // len(PER_DRAFT)
    start = NOW - timedelta(hours=drafts // RECIPES + 1)
    runs: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for n in range(drafts):
        recipe, slot = recipe_name(n % RECIPES), start + timedelta(hours=n // RECIPES)
        rid = run_id(recipe, slot.replace(tzinfo=None))
        key = draft_key("linkedin", rid, 1)
        runs.append(_run(rid, recipe, slot, key))
        rows.append(_draft(key, rid, recipe, slot))
        if len(runs) == CHUNK:
            yield RunRow.__table__, runs
            yield DraftRow.__table__, rows
            runs, rows = [], []
    if runs:
        yield RunRow.__table__, runs
        yield DraftRow.__table__, rows
    events: list[dict[str, Any]] = []
    for n in range(drafts):
        recipe, slot = recipe_name(n % RECIPES), start + timedelta(hours=n // RECIPES)
        rid = run_id(recipe, slot.replace(tzinfo=None))
        key = draft_key("linkedin", rid, 1)
        events.extend(_events(rid, key, slot))
        if len(events) >= CHUNK:
            yield EventRow.__table__, events
            events = []
    if events:
        yield EventRow.__table__, events


def _run(rid: str, recipe: str, slot: datetime, key: str) -> dict[str, Any]:
    return {
        "id": rid,
        "recipe": recipe,
        "slot_wall": slot.strftime("%Y-%m-%dT%H:%M"),
        "slot_at": slot,
        "state": "cancelled",
        "version": 1,
        "draft_key": key,
        "manual": False,
        "created_at": slot,
        "updated_at": slot,
    }


def _draft(key: str, rid: str, recipe: str, slot: datetime) -> dict[str, Any]:
    return {
        "key": key,
        "run_id": rid,
        "recipe": recipe,
        "platform": "linkedin",
        "version": 1,
        "state": "ready",
        "text": "t",
        "revision": 4,
        "text_hash": text_hash(key),
        "attempts_before": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "created_at": slot,
        "updated_at": slot,
    }


def _events(rid: str, key: str, slot: datetime) -> list[dict[str, Any]]:
    """Five decisions and five events that are none, one minute apart."""
    made = []
    for i, kind in enumerate(PER_DRAFT):
        at = slot + timedelta(minutes=2 * i)
        for decision in (None, kind):
            made.append(
                {
                    "at": at + timedelta(minutes=1 if decision else 0),
                    "subject": "draft",
                    "subject_id": key,
                    "run_id": rid,
                    "from_state": "ready",
                    "to_state": "ready",
                    "actor": "U0ANA" if decision else "w1",
                    "reason": None,
                    "decision": decision,
                    "revision": i + 1 if decision else None,
                }
            )
    return made


def load(store: Store, decisions: int) -> float:
    began = time.perf_counter()
    with store.engine.begin() as conn:
        for table, rows in history(decisions):
            conn.execute(sa.insert(table), rows)
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(sa.text("ANALYZE"))
    else:
        with store.engine.begin() as conn:
            conn.execute(sa.text("ANALYZE"))
    return time.perf_counter() - began


def timed(read: Callable[[], int], repeats: int) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(repeats):
        began = time.perf_counter()
        count = read()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), count


def measure(url: str, decisions: int, repeats: int) -> bool:
    store, cfg = Store(url), config()
    store.upgrade()
    took = load(store, decisions)
    print(f"  loaded {decisions:,} decisions and as many other events in {took:.0f} s")
    with store.read() as session:
        middle = read_decisions(session, cfg, limit=decisions // 2)[-1].id

    def newest(**how: Any) -> Callable[[], int]:
        def read() -> int:
            with store.read() as session:
                return len(read_decisions(session, cfg, **how))

        return read

    reads = {
        "newest 100": newest(limit=100),
        "100 below the middle (--before)": newest(limit=100, before=middle),
        "one recipe's newest 100 (--recipe)": newest(limit=100, recipe=recipe_name(7)),
        "--since the last day": newest(since=NOW - timedelta(days=1), limit=None),
    }
    ok = True
    for name, read in reads.items():
        median, count = timed(read, repeats)
        ok &= median <= (GOAL_MS if count <= 100 else GOAL_MS_PER_ROW * count)
        per_row = median / max(count, 1)
        print(f"  {name:<40} {count:>6} rows  median {median:7.2f} ms ({per_row:.3f} ms a row)")
    store.dispose()
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--database-url", default=os.environ.get("GALLEY_TEST_DATABASE_URL"))
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"decision log of {args.decisions:,} decisions; goal {GOAL_MS:.0f} ms a page of 100,")
    print(f"{GOAL_MS_PER_ROW} ms a row for --since (medians)")
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        print("SQLite")
        ok &= measure(f"sqlite:///{Path(folder) / 'bench.db'}", args.decisions, args.repeats)
    if args.database_url:
        print("PostgreSQL")
        url, drop = scratch_postgres(args.database_url, "decisions")
        try:
            ok &= measure(url, args.decisions, args.repeats)
        finally:
            drop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
