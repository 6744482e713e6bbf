"""What the reading pass (docs/design.md §28) costs at a long history, on SQLite and
PostgreSQL: the pass must cost the posts due, never the posts published.

Bulk-loads `--posts` publications (a succeeded publish receipt, its `post_checks` row,
verified and read three times, and the three readings) over two years, then times the
pass with nothing due (the last day's 1,200 publications taken up already, their next
reading not due), at that history and at a history of 1,000 posts; then with
`--due` posts due for a reading (an instant reader that counts its requests). Exits 1
when a goal is missed:

    .venv/bin/python -m bench.readings_scale [--posts 100000] [--database-url URL]

PostgreSQL runs when `--database-url` or GALLEY_TEST_DATABASE_URL names a server: a
database `galley_bench_<pid>` is created there and dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.history_scale import FixedClock
from bench.history_seed import NOW, config_text, recipe_name
from bench.scratch_db import scratch_postgres
from core.models import EffectRow, PostCheckRow, PostReadingRow
from core.policies import EffectStep, PostCheck
from core.ports import PostCounts, PostFound, PostRead
from core.publishing.readings import PostReadings
from core.setup.config import Recipe, parse_config
from core.states import EffectState
from core.store.engine import Store

IDLE_GOAL_MS = 50.0  # a pass with nothing due, at any history
RECIPES = 50
LABELS = (("1h", 3600), ("1d", 86400), ("7d", 604800))
SPAN = timedelta(days=730)
CHUNK = 5000
RECENT = 1200  # the last day's publications (50 recipes, hourly), taken up, not yet due


class BenchClock(FixedClock):
    """The seeded history's NOW, judging leases too: rows due by the seed's time, not
    by the database's clock of today."""

    judges_leases = True


class InstantReader:
    """Every recipe's webhook, reading back at once: counts its requests."""

    target = "webhook"
    counts_per_request = 25

    def __init__(self) -> None:
        self.requests = 0

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        self.requests += 1
        return PostFound()

    def read_counts(self, external_ids: Sequence[str]) -> Mapping[str, PostCounts]:
        self.requests += 1
        return {i: PostCounts(likes=3, reposts=1) for i in external_ids}


def _rows(posts: int) -> tuple[list[dict[str, Any]], ...]:
    effects: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    readings: list[dict[str, Any]] = []
    for n in range(posts):
        recipe = recipe_name(n % RECIPES)
        receipt = f"linkedin|{recipe}@2026-01-01T00:00~{n}|v1|publish:webhook"
        fresh = n >= posts - RECENT  # published in the last day: taken up, 1h read
        at = (
            NOW - timedelta(hours=20) * (posts - n) / RECENT
            if fresh
            else NOW - SPAN * (posts - n) / posts - timedelta(days=8)  # every reading done
        )
        done = 1 if fresh else len(LABELS)
        effects.append(
            {
                "key": receipt,
                "draft_key": receipt.rsplit("|", 1)[0],
                "step": EffectStep.PUBLISH.value,
                "payload_hash": "0" * 64,
                "state": EffectState.SUCCEEDED.value,
                "external_id": f"post-{n}",
                "tries": 1,
                "created_at": at,
                "updated_at": at,
            }
        )
        checks.append(
            {
                "receipt": receipt,
                "recipe": recipe,
                "target": "webhook",
                "external_id": f"post-{n}",
                "published_at": at,
                "state": PostCheck.VERIFIED.value,
                "due_at": NOW + timedelta(hours=1) if fresh else None,
                "tries": 0,
                "readings_done": done,
                "verified_at": at + timedelta(minutes=2),
            }
        )
        readings.extend(
            {
                "receipt": receipt,
                "label": label,
                "after_seconds": seconds,
                "recipe": recipe,
                "target": "webhook",
                "read_at": at + timedelta(seconds=seconds),
                "likes": n % 17,
                "reposts": n % 5,
                "replies": n % 3,
                "quotes": 0,
            }
            for label, seconds in LABELS[:done]
        )
    return effects, checks, readings


def load(store: Store, posts: int) -> None:
    tables = (EffectRow, PostCheckRow, PostReadingRow)
    with store.engine.begin() as conn:
        for table, rows in zip(tables, _rows(posts), strict=True):
            for start in range(0, len(rows), CHUNK):
                conn.execute(sa.insert(table), rows[start : start + CHUNK])
        if store.dialect == "postgresql":
            conn.execute(sa.text("ANALYZE"))


def make_due(store: Store, count: int) -> None:
    """`count` posts whose 7d reading falls due now (as though published a week ago)."""
    with store.engine.begin() as conn:
        receipts = conn.execute(
            sa.select(PostCheckRow.__table__.c.receipt).limit(count)  # type: ignore[attr-defined]
        ).scalars()
        conn.execute(
            sa.update(PostCheckRow)
            .where(PostCheckRow.__table__.c.receipt.in_(list(receipts)))  # type: ignore[attr-defined]
            .values(due_at=NOW - timedelta(seconds=1), readings_done=2)
        )


def timed_ms(readings: PostReadings, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        readings.read_due()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(url: str, posts: int, due: int, repeats: int) -> list[tuple[str, float, float | None]]:
    store = Store(url)
    store.upgrade()
    config = parse_config(config_text(RECIPES))
    reader = InstantReader()

    def readers(recipe: Recipe) -> list[Any]:
        return [reader]

    readings = PostReadings(
        store, config, BenchClock(), "bench", readers, lambda *_: False, limit=max(due, 200)
    )
    results: list[tuple[str, float, float | None]] = []
    load(store, min(posts, 1000))
    results.append(("nothing due, 1,000 posts", timed_ms(readings, repeats), IDLE_GOAL_MS))
    load_more = posts - min(posts, 1000)
    if load_more > 0:
        start = time.perf_counter()
        _load_offset(store, 1000, load_more)
        print(f"  loaded {posts:,} posts in {time.perf_counter() - start:.1f} s", flush=True)
    results.append((f"nothing due, {posts:,} posts", timed_ms(readings, repeats), IDLE_GOAL_MS))
    make_due(store, due)
    start = time.perf_counter()
    done = readings.read_due()
    took = (time.perf_counter() - start) * 1000
    assert done.readings == due, done
    results.append((f"{due} due ({reader.requests} count requests)", took, None))
    store.dispose()
    return results


def _load_offset(store: Store, offset: int, posts: int) -> None:
    """The rest of the history, after the first `offset` posts (their keys differ)."""
    tables = (EffectRow, PostCheckRow, PostReadingRow)
    with store.engine.begin() as conn:
        for table, rows in zip(tables, _rows(offset + posts), strict=True):
            skip = offset * (len(LABELS) if table is PostReadingRow else 1)
            for start in range(skip, len(rows), CHUNK):
                conn.execute(sa.insert(table), rows[start : start + CHUNK])
        if store.dialect == "postgresql":
            conn.execute(sa.text("ANALYZE"))


def report(results: list[tuple[str, float, float | None]]) -> bool:
    ok = True
    for name, ms, goal in results:
        missed = goal is not None and ms > goal
        ok &= not missed
        mark = "MISSED" if missed else "ok"
        shown = f"{goal:.0f} ms" if goal is not None else "-"
        print(f"  {name:<40} {ms:>9.2f} ms  goal {shown:>6}  {mark}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--posts", type=int, default=100_000, help="publications in the history")
    parser.add_argument("--due", type=int, default=100, help="posts due in the last pass")
    parser.add_argument("--database-url", default=os.environ.get("GALLEY_TEST_DATABASE_URL"))
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"reading pass at {args.posts:,} published posts; {time.strftime('%Y-%m-%d %H:%M')}")
    load_average = os.getloadavg()[0]
    print(f"1-minute load average {load_average:.2f}; goal: nothing due {IDLE_GOAL_MS:.0f} ms")
    ok = True
    backends = args.backends.split(",")
    if "sqlite" in backends:
        with tempfile.TemporaryDirectory() as directory:
            print("sqlite:", flush=True)
            url = f"sqlite:///{Path(directory) / 'readings.db'}"
            ok &= report(measure(url, args.posts, args.due, args.repeats))
    if "postgres" in backends and args.database_url:
        url, drop = scratch_postgres(args.database_url, "readings")
        try:
            print("postgres:", flush=True)
            ok &= report(measure(url, args.posts, args.due, args.repeats))
        finally:
            drop()
    elif "postgres" in backends:
        print("postgres: skipped (no --database-url and no GALLEY_TEST_DATABASE_URL)")
    print("all goals met" if ok else "GOALS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
