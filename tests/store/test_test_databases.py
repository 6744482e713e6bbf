"""The PostgreSQL test databases (tests/conftest.py) are handed from one test to the
next: the next test gets one as empty as a fresh clone of the template, and one whose
schema a test changed is never handed on."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from core.models import EventRow
from core.store.engine import normalise_url
from tests.conftest import PgDatabases

pytestmark = pytest.mark.postgres


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(normalise_url(url), poolclass=sa.NullPool)


def _leave_a_row(url: str) -> None:
    engine = _engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.insert(EventRow.__table__).values(  # type: ignore[attr-defined]
                at=datetime(2026, 1, 1, tzinfo=UTC),
                subject="run",
                subject_id="r",
                to_state="queued",
                actor="test",
            )
        )
    engine.dispose()


def test_a_database_handed_back_comes_again_empty_with_its_ids_from_the_start(
    pg_databases: PgDatabases,
) -> None:
    databases = pg_databases
    first = databases.take()
    url = databases.url(first)
    _leave_a_row(url)
    _leave_a_row(url)
    databases.give_back(first)
    again = databases.take()
    try:
        assert again == first
        engine = _engine(url)
        with engine.begin() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM events")).scalar() == 0
        engine.dispose()
        _leave_a_row(url)
        engine = _engine(url)
        with engine.begin() as conn:
            assert conn.execute(sa.text("SELECT id FROM events")).scalars().all() == [1]
        engine.dispose()
    finally:
        databases.give_back(again)


def test_a_database_whose_schema_a_test_changed_is_dropped_not_handed_on(
    pg_databases: PgDatabases,
) -> None:
    databases = pg_databases
    name = databases.take()
    engine = _engine(databases.url(name))
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE events ADD COLUMN planted integer"))
    engine.dispose()
    databases.give_back(name)
    assert name not in databases.free
    admin = databases.admin
    with admin.connect() as conn:
        found = conn.execute(
            sa.text("SELECT count(*) FROM pg_database WHERE datname = :n"), {"n": name}
        ).scalar()
    assert found == 0
