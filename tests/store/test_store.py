"""The store itself: migrations match the models, SQLite is set up safely."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

import core.store.engine
from core.store.engine import Store, normalise_url


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


def _backend_pid(store: Store) -> int:
    with store.transaction() as session:
        return int(session.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())


def test_a_pooled_connection_the_server_dropped_while_idle_is_replaced_before_use(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server ended an idle pooled connection (a restart, an idle timeout): the next
    transaction gets a new one instead of failing on the dead one."""
    monkeypatch.setattr(core.store.engine, "PING_AFTER_IDLE_S", 0.0)  # every reuse counts as idle
    store = Store(pg_url)
    first = _backend_pid(store)
    admin = sa.create_engine(normalise_url(pg_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        ended = conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
        assert ended.scalar_one() is True
    admin.dispose()

    assert _backend_pid(store) != first
    store.dispose()


def test_a_pooled_connection_given_back_a_moment_ago_is_not_pinged_again(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A draft's transactions follow each other within milliseconds: asking the server
    before each one was a round trip per transaction (pool_pre_ping)."""
    store = Store(pg_url)
    pings: list[object] = []
    real_ping = store.engine.dialect.do_ping
    monkeypatch.setattr(
        store.engine.dialect, "do_ping", lambda conn: pings.append(conn) or real_ping(conn)
    )
    pids = {_backend_pid(store) for _ in range(5)}

    assert (len(pids), pings) == (1, [])
    monkeypatch.setattr(core.store.engine, "PING_AFTER_IDLE_S", 0.0)
    _backend_pid(store)
    assert len(pings) == 1  # idle long enough: asked once, then used
    store.dispose()


def test_insert_ignore_refuses_sql_values_built_anew_at_each_call(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SQL value's INSERT is built once per expression object; an expression built per
    call would grow that cache without end, so the 65th distinct one is refused."""
    from datetime import UTC, datetime

    from core.models import RecipeRow
    from core.store.engine import insert_ignore

    monkeypatch.setattr(core.store.engine, "_WITH_SQL", {})
    now = datetime(2026, 11, 23, tzinfo=UTC)
    with store.transaction() as session:
        for n in range(64):
            version = sa.literal(n + 1, sa.Integer)  # a new expression each time
            assert insert_ignore(
                session, RecipeRow, name=f"r{n}", version=version, paused=False, updated_at=now
            )
        with pytest.raises(ValueError, match="once, at module level"):
            insert_ignore(
                session, RecipeRow, name="r64", version=sa.literal(1), paused=False, updated_at=now
            )
    with store.read() as session:
        names = session.execute(sa.select(RecipeRow.name)).scalars().all()
    assert sorted(names) == sorted(f"r{n}" for n in range(64))  # r64 was never sent


def test_insert_new_gives_the_row_as_stored_and_owned_by_the_session_without_a_read(
    store: Store,
) -> None:
    """The row comes back from the INSERT itself: UTC times as stored, no SELECT after it,
    a change to it written by one guarded UPDATE; a key already taken gives None and
    leaves the stored row as it was."""
    from datetime import UTC, datetime, timedelta, timezone

    from core.models import RecipeRow, RunRow
    from core.states import RunState
    from core.store.engine import insert_ignore, insert_new
    from core.store.transitions import guarded_update

    london_summer = timezone(timedelta(hours=1))
    slot_at = datetime(2026, 6, 1, 9, 0, tzinfo=london_summer)
    now = datetime(2026, 6, 1, 8, 0, 1, 250_000, tzinfo=UTC)
    values = dict(
        id="weekly@2026-06-01T09:00",
        recipe="weekly",
        slot_wall="2026-06-01T09:00",
        slot_at=slot_at,
        state=RunState.PENDING,
        version=1,
        manual=False,
        created_at=now,
        updated_at=now,
    )
    sent: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        sent.append(statement.split()[0].upper())

    with store.transaction() as session:
        insert_ignore(session, RecipeRow, name="weekly", version=1, paused=False, updated_at=now)
        sa.event.listen(store.engine, "before_cursor_execute", count)
        try:
            run = insert_new(session, RunRow, **values)
            assert run is not None and run in session
            assert (run.slot_at, run.slot_at.tzinfo) == (datetime(2026, 6, 1, 8, tzinfo=UTC), UTC)
            assert (run.reason, run.draft_key, run.publish_at) == (None, None, None)
            run.state = RunState.RUNNING
            guarded_update(session, run, state=RunState.PENDING)
            session.flush()
        finally:
            sa.event.remove(store.engine, "before_cursor_execute", count)
        assert sent == ["INSERT", "UPDATE"]  # nothing read back, nothing written twice
        again = insert_new(session, RunRow, **values | {"state": RunState.SKIPPED})
        assert again is None
    with store.read() as session:
        stored = session.execute(sa.select(RunRow.state, RunRow.slot_at)).one()
    assert tuple(stored) == (RunState.RUNNING, datetime(2026, 6, 1, 8, tzinfo=UTC))


def test_events_are_written_as_their_transaction_commits_and_dropped_with_a_rollback(
    store: Store,
) -> None:
    """A transaction's events go in one INSERT, in the order recorded, as it commits; a
    session used again after a rollback does not write the rolled-back ones."""
    from datetime import UTC, datetime

    from sqlmodel import Session

    from core.models import EventRow
    from core.states import EventSubject
    from core.store.transitions import record_event

    now = datetime(2026, 11, 23, 9, tzinfo=UTC)

    def event(session: Session, subject_id: str) -> None:
        record_event(
            session,
            subject=EventSubject.RUN,
            subject_id=subject_id,
            to_state="x",
            actor="t",
            at=now,
        )

    inserts: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.startswith("INSERT INTO events"):
            inserts.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", count)
    try:
        with Session(store.engine) as session:
            with session.begin():
                event(session, "rolled-back")
                session.rollback()
            with session.begin():
                for name in ("first", "second", "third"):
                    event(session, name)
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", count)
    with store.read() as session:
        kept = session.execute(sa.select(EventRow.subject_id).order_by(EventRow.id)).scalars()
        assert list(kept) == ["first", "second", "third"]
    assert len(inserts) == 1


def test_read_one_runs_outside_a_transaction_and_leaves_no_autocommit_behind(
    store: Store, db_url: str
) -> None:
    """PostgreSQL runs `read_one()`'s statement as its own transaction (no BEGIN, no
    COMMIT); the connection goes back to the pool as it came, so a later transaction
    that fails still rolls back everything it wrote."""
    from datetime import UTC, datetime

    from core.models import RecipeRow
    from core.store.engine import insert_ignore

    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite's read_one() is read(): a deferred transaction")
    now = datetime(2026, 11, 23, tzinfo=UTC)
    for attempt in range(12):  # more than the pool holds: every pooled connection is used
        with store.read_one() as session:
            session.execute(sa.select(RecipeRow.name)).all()
            driver = session.connection().connection.dbapi_connection
            assert driver is not None
            assert driver.info.transaction_status.name == "IDLE"  # no transaction open
        with pytest.raises(RuntimeError), store.transaction() as session:
            insert_ignore(
                session, RecipeRow, name=f"gone{attempt}", version=1, paused=False, updated_at=now
            )
            raise RuntimeError("the transaction fails after its write")
    with store.read() as session:
        assert session.execute(sa.select(RecipeRow.name)).all() == []
