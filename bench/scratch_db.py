"""A PostgreSQL database of a bench's own on the server the bench is pointed at (the
test server's URL), created empty and dropped, connections and all, when the bench ends."""

from __future__ import annotations

import os
from collections.abc import Callable

import sqlalchemy as sa

from core.store.engine import normalise_url


def scratch_postgres(server_url: str, purpose: str) -> tuple[str, Callable[[], None]]:
    """The new database's URL, and what drops it. `purpose` names it beside the process id
    (`galley_bench_report_4242`), so two benches, or a bench left behind, never share one."""
    name = f"galley_bench_{purpose}_{os.getpid()}"
    admin = sa.create_engine(normalise_url(server_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    url = sa.make_url(normalise_url(server_url)).set(database=name)
    return url.render_as_string(hide_password=False), drop
