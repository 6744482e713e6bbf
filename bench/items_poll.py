"""What an items recipe's poll costs against its history of seen items (issue 37).

    .venv/bin/python -m bench.items_poll [--entries 500] [--laps 15]
        [--histories 1000,10000,100000] [--backend sqlite|postgres] [--pg-url URL]

One process drives core's real step, `record_poll` in one transaction (the recipe row
locked, the feed's ids looked up, the new item recorded as its run), for a feed of
`--entries` entries of which one is new per poll, against `polled_items` holding 1k, 10k
and 100k items seen before. The feed is read once beforehand (the read costs the feed, not
the history) and the drafting after it is any run's draft (bench/draft_overhead.py).

Beside each figure, in the same minutes: a floor, the driver alone running one bare
SELECT of the feed's ids by primary key against the same table (`bench/floors.py`). The
poll must cost the new items, not the history: PASS when the poll at the largest history
takes under 50 ms (SQLite) and under twice its time at the smallest; exit 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

RECIPE = "weekly-update"
SOURCE = "blog"
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GOAL_MS = 50.0
GROWTH_LIMIT = 2.0  # largest history / smallest: O(history) would be ~100x
PG_ENV = "GALLEY_TEST_DATABASE_URL"
CONFIG = """
[slack]
review_channel = "C0REVIEW"

[[recipes]]
name = "weekly-update"
platform = "linkedin"
schedule = "*/5 * * * *"
prompt = "Write about this item."
trigger = "items"
source = { kind = "feed", url = "https://blog.example.com/feed.xml", name = "blog" }
"""


def seed(engine: sa.Engine, upto: int, already: int) -> None:
    """Items seen before, as earlier polls recorded them (bulk, not through the poll)."""
    from core.models import PolledItemRow, PolledSourceRow

    rows = [
        {
            "recipe": RECIPE,
            "source": SOURCE,
            "item_id": f"https://blog.example.com/?p={n}",
            "run_id": f"{RECIPE}@item:p-{n}",
            "same_as": None,
            "identity": f"{n:064x}",
            "title": f"Post {n}",
            "link": f"https://blog.example.com/post-{n}",
            "published_at": AT - timedelta(minutes=n),
            "text": "What happened.",
            "seen_at": AT,
        }
        for n in range(already, upto)
    ]
    with engine.begin() as connection:
        if already == 0:  # the source was polled before: this is no first poll
            source = {"recipe": RECIPE, "source": SOURCE, "first_polled_at": AT}
            connection.execute(sa.insert(PolledSourceRow.__table__), [source])  # type: ignore[attr-defined]
        for start in range(0, len(rows), 5000):
            connection.execute(sa.insert(PolledItemRow.__table__), rows[start : start + 5000])  # type: ignore[attr-defined]
    if engine.dialect.name == "postgresql":  # as autovacuum would after a history accrued
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("ANALYZE polled_items")


def feed(history: int, entries: int, new: int) -> list[object]:
    """The feed's entries newest first: one new, the rest the newest of the history."""
    from core.sources.items import SourceItem

    numbers = [10_000_000 + new, *range(history - 1, history - entries, -1)]
    return [
        SourceItem(
            source=SOURCE,
            item_id=f"https://blog.example.com/?p={n}",
            title=f"Post {n}",
            link=f"https://blog.example.com/post-{n}",
            published_at=AT - timedelta(minutes=n % 10_000),
            text="What happened.",
        )
        for n in numbers
    ]


def poll_ms(store: object, recipe: object, history: int, entries: int, lap: int) -> float:
    from core.scheduling.items import record_poll
    from core.slots.schedule import latest_slot_at_or_before

    slot = latest_slot_at_or_before(recipe, AT)  # type: ignore[arg-type]
    items = feed(history, entries, new=history * 1000 + lap)
    started = time.perf_counter()
    with store.transaction() as session:  # type: ignore[attr-defined]
        recorded = record_poll(session, recipe, slot, items, AT)  # type: ignore[arg-type]
    elapsed = (time.perf_counter() - started) * 1000
    assert len(recorded.waiting) == 1 and recorded.known == entries - 1, recorded
    return elapsed


def floor_ms(engine: sa.Engine, history: int, entries: int, laps: int) -> float:
    from bench.floors import bare_read

    ids = [f"https://blog.example.com/?p={n}" for n in range(history - 1, history - entries, -1)]
    marks = ",".join("?" * len(ids))
    sql = (
        f"SELECT item_id FROM polled_items WHERE recipe = ? AND source = ? AND item_id IN ({marks})"
    )
    return statistics.median(bare_read(engine, sql, (RECIPE, SOURCE, *ids), laps))


def measure(url: str, histories: list[int], entries: int, laps: int) -> dict[int, float]:
    from core.setup.config import parse_config
    from core.store.engine import Store

    store = Store(url)
    store.upgrade()
    recipe = parse_config(CONFIG).recipe(RECIPE)
    figures: dict[int, float] = {}
    seeded = 0
    for history in histories:
        seed(store.engine, history, seeded)
        seeded = history
        poll_ms(store, recipe, history, entries, lap=-1)  # warm the caches and statements
        times = [poll_ms(store, recipe, history, entries, lap) for lap in range(laps)]
        figure, floor = statistics.median(times), floor_ms(store.engine, history, entries, laps)
        figures[history] = figure
        print(
            f"{store.engine.dialect.name:9} {history:>7,} seen  poll of {entries} entries "
            f"(1 new): {figure:7.2f} ms  floor (bare SELECT of its ids) {floor:6.2f} ms  "
            f"x{figure / floor:5.1f}"
        )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--entries", type=int, default=500)
    parser.add_argument("--laps", type=int, default=15)
    parser.add_argument("--histories", default="1000,10000,100000")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-url", default=os.environ.get(PG_ENV))
    args = parser.parse_args()
    histories = sorted(int(h) for h in args.histories.split(","))
    with tempfile.TemporaryDirectory() as folder:
        if args.backend == "postgres":
            if not args.pg_url:
                print(f"postgres skipped: no --pg-url and {PG_ENV} is not set")
                return 0
            url = args.pg_url
        else:
            url = f"sqlite:///{Path(folder) / 'items.db'}"
        figures = measure(url, histories, args.entries, args.laps)
    largest, smallest = figures[histories[-1]], figures[histories[0]]
    growth = largest / smallest
    fast = largest < GOAL_MS or args.backend != "sqlite"
    verdict = "PASS" if fast and growth < GROWTH_LIMIT else "FAIL"
    print(
        f"{verdict}: {largest:.2f} ms at {histories[-1]:,} seen (goal under {GOAL_MS:.0f} ms on "
        f"SQLite), {growth:.2f}x the poll at {histories[0]:,} (limit {GROWTH_LIMIT:.0f}x)"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
