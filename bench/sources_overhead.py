"""What a recipe's sources add to a draft, beside the reads themselves (issue 36).

    .venv/bin/python -m bench.sources_overhead [--drafts N] [--items K] [--chars C]
        [--backends sqlite,postgres] [--pg-url URL]

One process drives core's real path, `DraftingService.draft_slot(recipe, slot,
manual=True)`, with a drafter answering at once from memory, twice per backend: a
recipe without sources, and the same recipe with one `file` source of K files of C
characters each (K items per run: the window, the snapshot's rows, the prompt's block).
The reader's own time is measured (by wrapping the service's reader) and subtracted:
what is left over the source-less median is Galley's own added cost per draft (goal:
under 50 ms), PASS or MISS, exit 1 on a miss.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

RECIPE = "weekly-update"  # tests.conftest's recipe: "0 9 * * mon" in Europe/London
NEWEST_SLOT = date(2026, 11, 23)
FILES_DATED = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # inside every slot's window below
SOURCES = (
    '\nwindow = "3650d"\nsources = [{ kind = "file", path = "notes/*.md", max_items = 500 }]\n'
)
PG_ENV = "GALLEY_TEST_DATABASE_URL"
GOAL_MS = 50.0


def slot_walls(count: int) -> list[str]:
    return [f"{NEWEST_SLOT - timedelta(weeks=i):%Y-%m-%d}T09:00" for i in range(count)]


def write_notes(folder: Path, items: int, chars: int) -> None:
    notes = folder / "notes"
    notes.mkdir()
    body = ("Shipped a fix for the login page on Safari. " * (chars // 44 + 1))[:chars]
    for n in range(items):
        path = notes / f"note-{n:03}.md"
        path.write_text(f"# Release v2.{n}\n{body}")
        os.utime(path, (FILES_DATED.timestamp(), FILES_DATED.timestamp()))


def draft_times(
    url: str, config_text: str, folder: Path, drafts: int
) -> tuple[list[float], list[float], int]:
    """(ms per draft, ms of reads per draft, items the last request's block held)."""
    from core.api.services import Services
    from core.drafting.basis import SourceAccess
    from core.drafting.service import DraftingService
    from core.setup.config import parse_config
    from core.sources.reading import read_source
    from core.store.engine import Store
    from core.testing import InstantDrafter

    store = Store(url)
    store.upgrade()
    config = parse_config(config_text)
    recipe = config.recipe(RECIPE)
    drafter = InstantDrafter("This week: shipped the thing. (benchmark draft)")
    service = DraftingService(store, drafter, worker="bench")
    service.basis.access = SourceAccess(config_dir=folder)
    reads: list[float] = []

    def timed_read(*args: Any) -> Any:
        started = time.perf_counter()
        try:
            return read_source(*args)
        finally:
            reads.append((time.perf_counter() - started) * 1000)

    service.basis.reader = timed_read
    resolve = Services(config, store).resolve_slot
    totals, read_ms = [], []
    for wall in slot_walls(drafts + 3):
        slot = resolve(recipe, wall)
        reads.clear()
        started = time.perf_counter()
        result = service.draft_slot(recipe, slot, manual=True)
        totals.append((time.perf_counter() - started) * 1000)
        read_ms.append(sum(reads))
        assert result.outcome == "drafted", result
    store.dispose()
    shown = drafter.requests[-1].prompt.count("<item ")
    return totals[3:], read_ms[3:], shown  # the first three warm the caches


@contextmanager
def database(backend: str, pg_url: str | None) -> Iterator[str]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/bench.db"
        return
    assert pg_url is not None
    from core.store.engine import normalise_url

    admin = sa.create_engine(normalise_url(pg_url), isolation_level="AUTOCOMMIT")
    name = f"galley_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield (
            sa.make_url(normalise_url(pg_url))
            .set(database=name)
            .render_as_string(hide_password=False)
        )
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def measure(backend: str, pg_url: str | None, args: argparse.Namespace) -> bool:
    from tests.conftest import config_text

    base = config_text(pending_limit=10_000)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        write_notes(root, args.items, args.chars)
        with database(backend, pg_url) as url:
            plain, _, _ = draft_times(url, base, root, args.drafts)
        with database(backend, pg_url) as url:
            sourced, reads, shown = draft_times(url, base + SOURCES, root, args.drafts)
    median: Callable[[list[float]], float] = statistics.median
    own = [total - read for total, read in zip(sourced, reads, strict=True)]
    added = median(own) - median(plain)
    verdict = "PASS" if added < GOAL_MS else "MISS"
    print(
        f"{backend:9} no sources {median(plain):7.2f} ms · with {args.items} items "
        f"{median(sourced):7.2f} ms (reads {median(reads):6.2f} ms, {shown} items shown) · "
        f"added beside the reads {added:6.2f} ms (goal {GOAL_MS:.0f}) {verdict}"
    )
    return added < GOAL_MS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drafts", type=int, default=40)
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--chars", type=int, default=1000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--pg-url", default=os.environ.get(PG_ENV))
    args = parser.parse_args()
    ok = True
    for backend in args.backends.split(","):
        if backend == "postgres" and not args.pg_url:
            print(f"postgres  skipped: no --pg-url and {PG_ENV} is not set")
            continue
        ok = measure(backend, args.pg_url, args) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
