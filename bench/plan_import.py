"""What `galley import plan.csv` costs (docs/design.md §37), on SQLite and PostgreSQL.

Writes a plan of `--rows` posts (a week of hourly times, one recipe with a Bluesky target
so every row is measured against a limit), imports it through the operator API as
`galley import` does, then imports it again (every row already there). Prints the time
of each; the goal is a few seconds for 5,000 rows. Exits 1 past the goal, or when the
second import adds anything:

    .venv/bin/python -m bench.plan_import [--rows 5000] [--database-url URL]

PostgreSQL runs when `--database-url` or GALLEY_TEST_DATABASE_URL names a server: a
database `galley_bench_plan_<pid>` is created there and dropped afterwards.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.scratch_db import scratch_postgres
from core.api.galley import Galley
from core.setup.config import parse_config
from core.store.engine import Store
from core.testing import FrozenClock

NOW = datetime(2026, 12, 1, tzinfo=UTC)
GOAL_S = 5.0  # the first import of 5,000 rows
CONFIG = """
[slack]
review_channel = "C0R"
[defaults]
model = "m"
timezone = "Europe/London"
[[recipes]]
name = "launch"
platform = "bluesky"
schedule = "0 9 * * mon"
system = "s"
prompt = "p"
publish = { to = "bluesky", handle = "acme.bsky.social", service = "http://127.0.0.1:9" }
"""


def write_plan(path: Path, rows: int) -> None:
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["publish_at", "recipe", "text", "id"])
        for n in range(rows):
            at = NOW + timedelta(days=1, hours=n)
            text = f"Post {n}: what we shipped, and what comes next. #{n % 7}"
            writer.writerow([at.isoformat(), "launch", text, f"row-{n}" if n % 2 else ""])


def import_twice(url: str, plan: Path) -> tuple[float, float, int, int]:
    store = Store(url)
    store.ensure_schema()
    galley = Galley(parse_config(CONFIG), store, clock=FrozenClock(NOW))
    started = time.perf_counter()
    first = galley.import_plan(plan, actor="bench")
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    second = galley.import_plan(plan, actor="bench")
    second_s = time.perf_counter() - started
    store.dispose()
    return first_s, second_s, len(first.written.added), len(second.written.added)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--database-url", default=os.environ.get("GALLEY_TEST_DATABASE_URL"))
    args = parser.parse_args()
    missed = False
    with tempfile.TemporaryDirectory() as folder:
        plan = Path(folder) / "plan.csv"
        write_plan(plan, args.rows)
        backends: list[tuple[str, str, Callable[[], None]]] = [
            ("sqlite", f"sqlite:///{folder}/bench.db", lambda: None)
        ]
        if args.database_url:
            url, drop = scratch_postgres(args.database_url, "plan")
            backends.append(("postgres", url, drop))
        else:
            print("postgres: skipped (no --database-url or GALLEY_TEST_DATABASE_URL)")
        print(f"plan of {args.rows:,} rows; goal {GOAL_S:.0f} s for the first import")
        print("backend   first (s)  added   again (s)  added")
        for name, url, drop in backends:
            try:
                first_s, again_s, added, again = import_twice(url, plan)
            finally:
                drop()
            verdict = "PASS" if first_s <= GOAL_S and again == 0 else "MISS"
            missed |= verdict == "MISS"
            print(f"{name:9} {first_s:9.2f}  {added:5}   {again_s:9.2f}  {again:5}  {verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
