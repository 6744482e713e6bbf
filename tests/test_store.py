"""The store itself: migrations match the models, SQLite is set up safely."""

from __future__ import annotations

import re
from pathlib import Path

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

from core.store import Store


def test_migrations_match_the_models(store: Store) -> None:
    """A model change without its migration fails here, on both backends."""
    with store.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    assert diff == []
    assert store.current_revision() == store.head_revision()


def _predicate(where: object) -> str | None:
    """An index predicate without the casts, brackets and spacing a backend adds."""
    if where is None:
        return None
    text = str(getattr(where, "text", where)).lower()
    text = re.sub(r"::[a-z ]+", "", text)
    return re.sub(r"[()\s]", "", text)


def test_migrations_create_every_index_of_the_models(store: Store) -> None:
    """Names, columns and the WHERE of partial indexes, which alembic does not compare."""
    where_key = f"{store.dialect}_where"
    inspector = sa.inspect(store.engine)
    for table in SQLModel.metadata.sorted_tables:
        found = {
            ix["name"]: (
                ix["column_names"],
                _predicate(ix.get("dialect_options", {}).get(where_key)),
            )
            for ix in inspector.get_indexes(table.name)
        }
        for index in table.indexes:
            expected = (
                [c.name for c in index.columns],
                _predicate(index.dialect_kwargs.get(where_key)),
            )
            assert found.get(str(index.name)) == expected, f"{table.name}.{index.name}"


def test_an_empty_sqlite_file_upgrades_itself(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert store.current_revision() is None

    store.ensure_schema()
    store.ensure_schema()  # idempotent

    assert store.current_revision() == store.head_revision()
    with store.engine.connect() as connection:
        pragmas = {
            name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "busy_timeout", "foreign_keys")
        }
    assert pragmas == {"journal_mode": "wal", "busy_timeout": 30000, "foreign_keys": 1}
    store.dispose()


def test_foreign_keys_are_enforced(store: Store) -> None:
    from datetime import UTC, datetime

    from core.models import RunRow

    now = datetime.now(UTC)
    try:
        with store.transaction() as session:
            session.add(
                RunRow(
                    id="ghost@2026-01-01T00:00",
                    recipe="no-such-recipe",
                    slot_wall="2026-01-01T00:00",
                    slot_at=now,
                    state="pending",  # type: ignore[arg-type]
                    created_at=now,
                    updated_at=now,
                )
            )
    except sa.exc.IntegrityError:
        return
    raise AssertionError("a run for an unknown recipe was stored")
