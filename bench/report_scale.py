"""What the report costs at a year of history, on SQLite and PostgreSQL.

Bulk-loads a year (docs/design.md §38): 20 recipes, `--posts` published drafts spread
evenly over 365 days, each with its run, its post read back (a 1h and a 1d reading), one
model call, and `--decisions` decision events (edits, redrafts, approvals) among them.
Then times `g.report()` over the last 7 days as `galley report` reads it, beside a floor
run in the same process: the driver alone reading the window's posts (bench/floors.py).
Exits 1 past GOAL_MS:

    .venv/bin/python -m bench.report_scale [--posts 50000] [--decisions 1000000]

PostgreSQL runs when `--database-url` or GALLEY_TEST_DATABASE_URL names a server: a
database `galley_bench_report_<pid>` is created there and dropped afterwards.
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

from bench.floors import bare_read, ratio
from bench.scratch_db import scratch_postgres
from core.api.report import read_report
from core.identity import draft_key, run_id, text_hash
from core.models import (
    AttemptRow,
    DraftRow,
    EventRow,
    PostCheckRow,
    PostReadingRow,
    RecipeRow,
    RunRow,
)
from core.store.engine import Store

RECIPES = 20
NOW = datetime(2026, 12, 7, 10, tzinfo=UTC)
YEAR = timedelta(days=365)
WINDOW = timedelta(days=7)
CHUNK = 20_000
GOAL_MS = 100.0  # median of the report over the last 7 days
KINDS = ("edit", "redraft", "approval", "approval", "unapprove")


def recipe_name(index: int) -> str:
    return f"recipe-{index:02d}"


def target_of(index: int) -> str:
    return f"bluesky:r{index:02d}.bsky.social"


def history(posts: int, decisions: int) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """Chunks of rows, table by table, each table's rows before the next's."""
    yield RecipeRow.__table__, [{"name": recipe_name(i), "updated_at": NOW} for i in range(RECIPES)]
    step = YEAR / posts
    slots = [(n, NOW - YEAR + step * n) for n in range(posts)]
    tables: list[tuple[Any, Callable[[int, datetime], list[dict[str, Any]]]]] = [
        (RunRow.__table__, lambda n, at: [_run(n, at)]),
        (DraftRow.__table__, lambda n, at: [_draft(n, at)]),
        (AttemptRow.__table__, lambda n, at: [_attempt(n, at)]),
        (PostCheckRow.__table__, lambda n, at: [_post(n, at)]),
        (PostReadingRow.__table__, _readings),
        (EventRow.__table__, lambda n, at: _events(n, at, decisions // posts)),
    ]
    for table, rows_of in tables:
        rows: list[dict[str, Any]] = []
        for n, at in slots:
            rows.extend(rows_of(n, at))
            if len(rows) >= CHUNK:
                yield table, rows
                rows = []
        if rows:
            yield table, rows


def _ids(n: int, at: datetime) -> tuple[str, str, str]:
    recipe = recipe_name(n % RECIPES)
    rid = run_id(recipe, at.replace(tzinfo=None, microsecond=0)) + f"#{n}"
    return recipe, rid, draft_key("bluesky", rid, 1)


def _run(n: int, at: datetime) -> dict[str, Any]:
    recipe, rid, key = _ids(n, at)
    return {"id": rid, "recipe": recipe, "slot_wall": at.isoformat(), "slot_at": at,
            "state": "succeeded", "version": 1, "draft_key": key, "manual": False,
            "created_at": at, "updated_at": at}  # fmt: skip


def _draft(n: int, at: datetime) -> dict[str, Any]:
    recipe, rid, key = _ids(n, at)
    return {"key": key, "run_id": rid, "recipe": recipe, "platform": "bluesky", "version": 1,
            "state": "published" if n % 5 else "rejected", "text": f"text {n}",
            "revision": 1 + n % 3, "text_hash": text_hash(key), "attempts_before": 0,
            "input_tokens": 0, "output_tokens": 0, "ready_at": at,
            "decided_at": at + timedelta(minutes=n % 120), "decision_reason": "off-topic",
            "created_at": at, "updated_at": at}  # fmt: skip


def _attempt(n: int, at: datetime) -> dict[str, Any]:
    recipe, rid, key = _ids(n, at)
    return {"id": f"{key}#1", "run_id": rid, "recipe": recipe, "draft_key": key, "number": 1,
            "worker": "w", "model": "claude-sonnet-4-5", "started_at": at, "finished_at": at,
            "outcome": "ok", "input_tokens": 1000, "output_tokens": 200,
            "cache_creation_tokens": 0, "cache_read_tokens": 0, "redraft": False,
            "cause": "draft", "mode": "sync"}  # fmt: skip


def _post(n: int, at: datetime) -> dict[str, Any]:
    recipe, _, key = _ids(n, at)
    return {"receipt": f"{key}|publish", "recipe": recipe, "target": target_of(n % RECIPES),
            "external_id": str(n), "url": f"https://bsky.app/p/{n}", "published_at": at,
            "state": "verified", "tries": 0, "readings_done": 2}  # fmt: skip


def _readings(n: int, at: datetime) -> list[dict[str, Any]]:
    recipe, _, key = _ids(n, at)
    return [
        {"receipt": f"{key}|publish", "label": label, "after_seconds": after, "recipe": recipe,
         "target": target_of(n % RECIPES), "read_at": at + timedelta(seconds=after),
         "likes": (n * 7 + after) % 40, "reposts": n % 5, "replies": n % 3, "quotes": 0}
        for label, after in (("1h", 3600), ("1d", 86400))
    ]  # fmt: skip


def _events(n: int, at: datetime, per_draft: int) -> list[dict[str, Any]]:
    _, rid, key = _ids(n, at)
    return [
        {"at": at + timedelta(minutes=i), "subject": "draft", "subject_id": key, "run_id": rid,
         "from_state": "ready", "to_state": "ready", "actor": "U0ANA", "reason": None,
         "decision": KINDS[i % len(KINDS)], "revision": 1 + i}
        for i in range(per_draft)
    ]  # fmt: skip


def load(store: Store, posts: int, decisions: int) -> float:
    began = time.perf_counter()
    with store.engine.begin() as conn:
        for table, rows in history(posts, decisions):
            conn.execute(sa.insert(table), rows)
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(sa.text("ANALYZE"))
    else:
        with store.engine.begin() as conn:
            conn.execute(sa.text("ANALYZE"))
    return time.perf_counter() - began


def measure(url: str, posts: int, decisions: int, repeats: int) -> bool:
    store = Store(url)
    store.upgrade()
    took = load(store, posts, decisions)
    print(f"  loaded {posts:,} published drafts and {decisions:,} decisions in {took:.0f} s")
    recipes = [recipe_name(i) for i in range(RECIPES)]
    times, rows = [], 0
    for _ in range(repeats):
        began = time.perf_counter()
        with store.read() as session:
            rows = len(read_report(session, recipes, NOW, WINDOW))
        times.append((time.perf_counter() - began) * 1000)
    median = statistics.median(times)
    since = (NOW - WINDOW).replace(tzinfo=None) if store.engine.dialect.name == "sqlite" else None
    floor = bare_read(
        store.engine,
        "SELECT receipt, recipe, target, published_at, state, url FROM post_checks"
        " WHERE published_at > ?",
        (since or NOW - WINDOW,),
        repeats,
    )
    print(
        f"  report, last 7 days: {rows} rows, median {median:.1f} ms (goal {GOAL_MS:.0f} ms);"
        f" floor (the window's posts, driver alone) {statistics.median(floor):.2f} ms;"
        f" ratio {ratio(median, floor):.0f}x; load average {os.getloadavg()[0]:.1f}"
    )
    store.dispose()
    return median <= GOAL_MS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--posts", type=int, default=50_000)
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--database-url", default=os.environ.get("GALLEY_TEST_DATABASE_URL"))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    print(f"report over a year of {args.posts:,} posts and {args.decisions:,} decisions")
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        print("SQLite")
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        ok &= measure(url, args.posts, args.decisions, args.repeats)
    if args.database_url and not args.sqlite_only:
        print("PostgreSQL")
        url, drop = scratch_postgres(args.database_url, "report")
        try:
            ok &= measure(url, args.posts, args.decisions, args.repeats)
        finally:
            drop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
