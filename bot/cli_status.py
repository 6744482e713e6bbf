"""`galley status`: each recipe's version, pause flag, review queue and next slot, and
the uncertain runs, read through SQLAlchemy Core (core/api/status_read.py). Nothing
here imports typer: the executable answers `galley status` before building the
command-line app (bot/launch.py), and the typer command calls the same two functions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.cli_output import imports_done, out, print_json, table

if TYPE_CHECKING:
    from core.api.status_views import Status


def read_status() -> Status:
    """`Galley.status()` through SQLAlchemy Core: no ORM, SQLModel or service wiring to
    load first (bench/cli_startup.py measures it)."""
    from core.api.status_read import read_status as read
    from core.clock import SystemClock
    from core.setup.config import load_config
    from core.setup.settings import load_settings
    from core.store.engine import Store

    imports_done()
    settings = load_settings()
    config = load_config(settings.galley_config)
    store = Store(settings.galley_database_url)
    store.ensure_schema()
    with store.reachable(), store.read_core() as connection:
        return read(connection, config, SystemClock().now())


def print_status(report: Status, as_json: bool) -> None:
    """The status as one JSON document, or as a table and a line of uncertain runs."""
    if as_json:
        print_json(report.to_json())
        return
    rows = [
        [
            r.name,
            f"v{r.version}",
            "paused" if r.paused else "",
            f"{r.pending}/{r.pending_limit}",
            str(r.in_batch) if r.in_batch else "",
            r.next_slot,
            r.last_poll or "",
        ]
        for r in report.recipes
    ]
    columns = ["recipe", "version", "paused", "pending", "in a batch", "next slot", "last poll"]
    out.print(table("recipes", columns, rows))
    if report.uncertain:
        labels = report.uncertain_labels()  # an item run with its item (docs/design.md §29)
        out.print("uncertain runs: " + ", ".join(labels), markup=False, highlight=False)
    for line in report.expiries:  # docs/design.md §36: known token expiry dates
        out.print(line, markup=False, highlight=False)
