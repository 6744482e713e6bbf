"""What a recipe's sources add to a draft, beside the reads themselves (issue 36).

    .venv/bin/python -m bench.sources_overhead [--drafts N] [--items K] [--chars C]
        [--backends sqlite,postgres] [--pg-url URL]

One process drives core's real path, `DraftingService.draft_slot(recipe, slot,
manual=True)`, with a drafter answering at once from memory, twice per backend: a
recipe without sources, and the same recipe with one `file` source of K files of C
characters each (K items per run: the window, the snapshot's rows, the prompt's block).
The two are drafted in turn, slot by slot, so a busy machine slows both alike. The
reader's own time is measured (by wrapping the service's reader) and subtracted: the
median over pairs of (with sources - reads - without) is Galley's own added cost per
draft (goal: under 50 ms), PASS or MISS, exit 1 on a miss.
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

RECIPE = "weekly-update"  # core.testing's recipe: "0 9 * * mon" in Europe/London
NEWEST_SLOT = date(2026, 11, 23)
FILES_DATED = datetime(2020, 1, 6, 12, 0, tzinfo=UTC)  # inside every slot's 10-year window
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


class Drafting:
    """One database and one drafting service for one config, timing each draft."""

    def __init__(self, url: str, config_text: str, folder: Path) -> None:
        from core.api.services import Services
        from core.drafting.basis import SourceAccess
        from core.drafting.service import DraftingService
        from core.setup.config import parse_config
        from core.store.engine import Store
        from core.testing import InstantDrafter

        self.store = Store(url)
        self.store.upgrade()
        config = parse_config(config_text)
        self.recipe = config.recipe(RECIPE)
        self.drafter = InstantDrafter("This week: shipped the thing. (benchmark draft)")
        self.service = DraftingService(self.store, self.drafter, worker="bench")
        self.service.basis.access = SourceAccess(config_dir=folder)
        self.service.basis.reader = self._timed_read
        self.resolve = Services(config, self.store).resolve_slot
        self.reads: list[float] = []

    def _timed_read(self, *args: Any) -> Any:
        from core.sources.reading import read_source

        started = time.perf_counter()
        try:
            return read_source(*args)
        finally:
            self.reads.append((time.perf_counter() - started) * 1000)

    def draft(self, wall: str) -> tuple[float, float]:
        """(ms of the draft, ms of its reads)."""
        slot = self.resolve(self.recipe, wall)
        self.reads.clear()
        started = time.perf_counter()
        result = self.service.draft_slot(self.recipe, slot, manual=True)
        took = (time.perf_counter() - started) * 1000
        assert result.outcome == "drafted", result
        return took, sum(self.reads)


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
    """Drafts of the two recipes interleaved, so a busy machine slows both alike; the
    added cost is the median of each pair's difference."""
    from core.setup.sample_config import config_text

    base = config_text(pending_limit=10_000)
    with (
        tempfile.TemporaryDirectory() as folder,
        database(backend, pg_url) as plain_url,
        database(backend, pg_url) as sourced_url,
    ):
        root = Path(folder)
        write_notes(root, args.items, args.chars)
        plain, sourced = (
            Drafting(plain_url, base, root),
            Drafting(sourced_url, base + SOURCES, root),
        )
        pairs = []
        for number, wall in enumerate(slot_walls(args.drafts + 3)):
            without, _ = plain.draft(wall)
            total, reads = sourced.draft(wall)
            if number >= 3:  # the first three warm the caches
                pairs.append((without, total, reads))
        shown = sourced.drafter.requests[-1].prompt.count("<item ")
        plain.store.dispose()
        sourced.store.dispose()
    median: Callable[[list[float]], float] = statistics.median
    added = median([total - reads - without for without, total, reads in pairs])
    verdict = "PASS" if added < GOAL_MS else "MISS"
    print(
        f"{backend:9} no sources {median([p[0] for p in pairs]):7.2f} ms · with {args.items} "
        f"items {median([p[1] for p in pairs]):7.2f} ms (reads {median([p[2] for p in pairs]):5.2f}"
        f" ms, {shown} items shown) · added beside the reads {added:6.2f} ms "
        f"(goal {GOAL_MS:.0f}) {verdict}"
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
