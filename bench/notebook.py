"""Notebook figures over a realistic history: 100,000 runs (about 80,000 drafts, 450,000
events and 88,000 model calls, seeded by tests/harness/history.py), on SQLite and PostgreSQL.

1. `Galley.runs(limit=None).to_frame()`: every run, with its attempt count, as a
   DataFrame.
2. The weekly approval-rate plot, `galley.plots.decision_rates()`: the figure built,
   and rendered to PNG as Jupyter would show it.
3. The other plots, for scale.

The goal is under 2 s each for 1 and 2 on this machine.

    .venv/bin/python -m bench.notebook [--runs 100000] [--repeat 3] [--backends sqlite,postgres]

PostgreSQL needs --pg-url or GALLEY_TEST_DATABASE_URL; a database is created for the run
and dropped after it.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from core.api.galley import Galley
from core.setup.config import parse_config
from core.store.engine import Store, normalise_url
from tests.harness.history import CONFIG, seed_history

START = datetime(2014, 1, 6, 6, 0, tzinfo=UTC)  # 100,000 runs two hours apart: 23 years


@contextmanager
def database(backend: str, pg_url: str | None) -> Iterator[str]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{Path(folder) / 'bench.db'}"
        return
    assert pg_url is not None
    name = f"galley_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(normalise_url(pg_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.make_url(normalise_url(pg_url)).set(database=name).render_as_string(False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def timed(what: Callable[[], Any], repeat: int) -> tuple[str, Any]:
    """The median wall time of `repeat` calls (and the median CPU time of this process,
    which other people's work on a shared machine does not inflate), and the last result.
    The database server's own CPU time (PostgreSQL) is in the wall time only."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = what()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return f"{statistics.median(walls):6.3f} s wall ({statistics.median(cpus):.3f} s CPU)", result


def png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def bench(backend: str, url: str, runs: int, repeat: int) -> None:
    store = Store(url)
    store.upgrade()
    started = time.perf_counter()
    history = seed_history(store, runs=runs, start=START)
    seeded = time.perf_counter() - started
    if store.dialect == "postgresql":
        with store.engine.connect() as conn:
            conn.execute(sa.text("ANALYZE"))
            conn.commit()
    with store.transaction() as session:
        counts = {
            table: session.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar()
            for table in ("runs", "drafts", "events", "attempts")
        }
    print(f"\n{backend}: seeded {history.runs:,} runs in {seeded:.1f} s: {counts}")
    galley = Galley(parse_config(CONFIG), store)

    seconds, frame = timed(lambda: galley.runs(limit=None).to_frame(), repeat)
    print(f"  runs(limit=None).to_frame()       {seconds}  ({len(frame):,} rows)")
    seconds, _ = timed(lambda: galley.runs().to_frame(), repeat)
    print(f"  runs().to_frame() (newest 50)     {seconds}")
    seconds, _ = timed(galley.plots.decision_rates, repeat)
    print(f"  plots.decision_rates() built      {seconds}")
    seconds, _ = timed(lambda: png(galley.plots.decision_rates()), repeat)
    print(f"  plots.decision_rates() as PNG     {seconds}")
    for name in ("queue_depth", "time_to_decision", "cost", "skipped"):
        plot = getattr(galley.plots, name)
        seconds, _ = timed(lambda plot=plot: png(plot()), repeat)
        print(f"  plots.{name}() as PNG{' ' * (20 - len(name))}{seconds}")
    seconds, _ = timed(lambda: png(galley.plots.timeline(history.run_ids[-1])), repeat)
    print(f"  plots.timeline(run) as PNG        {seconds}")
    seconds, _ = timed(lambda: galley.drafts().to_frame(), repeat)
    print(f"  drafts() waiting, to_frame()      {seconds}")
    store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--pg-url", default=os.environ.get("GALLEY_TEST_DATABASE_URL"))
    args = parser.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} CPUs, load average {load}; median of {args.repeat} calls each")
    for backend in args.backends.split(","):
        if backend == "postgres" and not args.pg_url:
            print("\npostgres: skipped (no --pg-url or GALLEY_TEST_DATABASE_URL)")
            continue
        with database(backend, args.pg_url) as url:
            bench(backend, url, args.runs, args.repeat)


if __name__ == "__main__":
    main()
