"""Shared fixtures: one store contract over SQLite and PostgreSQL, fake APIs, configs.

PostgreSQL tests run when GALLEY_TEST_DATABASE_URL points at a server (CI sets it);
each test gets a database cloned from a migrated template, as procrastinate does, and
emptied for the next test once it is done (`PgDatabases`). SQLite files are copies of one
migrated file.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from core.setup.sample_config import config_text, make_config
from core.store.engine import Store, normalise_url
from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness import real_pds, slow_marks
from tests.harness.local_names import names_resolved_locally

PG_URL = os.environ.get("GALLEY_TEST_DATABASE_URL")
TEMPLATE = f"galley_template_{os.getpid()}"
__all__ = ["PG_URL", "config_text", "make_config"]  # kept here for tests


def pytest_report_header() -> list[str]:
    if PG_URL:
        postgres = f"galley: PostgreSQL tests run against {sa.make_url(PG_URL).render_as_string()}"
    else:
        postgres = "galley: GALLEY_TEST_DATABASE_URL is not set: PostgreSQL tests are SKIPPED"
    missing = real_pds.not_installed()
    pds = f"galley: {missing}: its tests are SKIPPED" if missing else "galley: real PDS tests run"
    return [postgres, pds]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow_marks.mark_server_tests(items)


@pytest.fixture(autouse=True)
def no_name_resolved_off_this_machine() -> Iterator[None]:
    """A link in a post (a link card's page) or a feed's found URL names hosts like
    `acme.example`: resolving one would send a DNS query off the machine."""
    with names_resolved_locally():
        yield


@pytest.fixture(autouse=True)
def fast_tests_start_no_server(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The fast loop's promise (tests/harness/slow_marks.py): an unmarked test starts no
    server and no process. Yields what such a test tried to start (also from a thread)."""
    if slow_marks.is_slow(request.node):
        yield []
        return
    with slow_marks.starts_nothing(request.node.nodeid) as started:
        yield started
    assert not started, f"{request.node.nodeid} started {started} but is not marked slow"


def _admin_engine() -> sa.Engine:
    assert PG_URL is not None
    return sa.create_engine(normalise_url(PG_URL), isolation_level="AUTOCOMMIT")


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    if not PG_URL:
        pytest.skip("PostgreSQL: GALLEY_TEST_DATABASE_URL is not set")
    admin = _admin_engine()
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{TEMPLATE}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{TEMPLATE}"'))
    url = sa.make_url(normalise_url(PG_URL)).set(database=TEMPLATE)
    store = Store(url.render_as_string(hide_password=False))
    store.upgrade()
    store.dispose()
    yield TEMPLATE
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)'))
    admin.dispose()


# What a test database must look like to be handed to the next test: its schema, its
# sequences and its migration, as cloned from the template (once its rows are deleted)
_SHAPE = """
SELECT string_agg(x, E'\\n' ORDER BY x) FROM (
  SELECT 'column ' || table_schema || '.' || table_name || '.' || column_name || ' '
         || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
    FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog', 'information_schema')
  UNION ALL SELECT 'index ' || schemaname || ' ' || indexdef FROM pg_indexes
    WHERE schemaname NOT IN ('pg_catalog', 'information_schema')
  UNION ALL SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' '
         || pg_get_constraintdef(oid) FROM pg_constraint
    WHERE connamespace = 'public'::regnamespace
  UNION ALL SELECT 'sequence ' || sequencename || ' ' || coalesce(last_value::text, '-')
    FROM pg_sequences WHERE schemaname = 'public'
  UNION ALL SELECT 'object ' || relname || ' ' || relkind::text FROM pg_class
    WHERE relnamespace = 'public'::regnamespace
  UNION ALL SELECT 'function ' || proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace
  UNION ALL SELECT 'trigger ' || tgname FROM pg_trigger WHERE NOT tgisinternal
  UNION ALL SELECT 'type ' || typname FROM pg_type WHERE typnamespace = 'public'::regnamespace
  UNION ALL SELECT 'schema ' || nspname FROM pg_namespace
  UNION ALL SELECT 'extension ' || extname FROM pg_extension
  UNION ALL SELECT 'migration ' || version_num FROM alembic_version
) AS shape(x)
"""
_TABLES = (
    "SELECT quote_ident(tablename) FROM pg_tables"
    " WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
)

_EMPTYING = (
    "lock_timeout = '10s'",
    "session_replication_role = replica",
    "synchronous_commit = off",
)
_RESTART = (
    "SELECT setval(format('%I.%I', schemaname, sequencename), start_value, false)"
    " FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL"
)


class PgDatabases:
    """A worker's test databases, cloned from the template. A test hands its database
    back emptied (every row deleted, every sequence restarted) for the next one, if
    it still has the template's shape; otherwise it is dropped. Cloning and dropping
    cost 0.3 to 2 s a test (DROP DATABASE forces a checkpoint of the whole server)."""

    def __init__(self, template: str) -> None:
        self.template = template
        self.admin = _admin_engine()
        self.made: list[str] = []
        self.free: list[str] = []
        self.shape = self._shape_of(template)
        assert self.shape is not None and not self._has_rows(template), "truncating would differ"

    def url(self, name: str) -> str:
        assert PG_URL is not None
        url = sa.make_url(normalise_url(PG_URL)).set(database=name)
        return url.render_as_string(hide_password=False)

    def take(self, *, fresh: bool = False) -> str:
        """A database with the template's shape and no rows; `fresh`: a new clone, whose
        files hold no dead rows and whose tables were never analyzed, so a plan the test
        explains is the one a new installation gets, whatever ran before."""
        if self.free and not fresh:
            return self.free.pop()
        name = f"galley_test_{uuid.uuid4().hex[:10]}"
        with self.admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"'))
        self.made.append(name)
        return name

    def give_back(self, name: str, *, fresh: bool = False) -> None:
        if fresh:  # its plans were the point: the next fresh test gets a new clone too
            self._drop(name)
            return
        with self.admin.connect() as conn:  # whatever the test left connected
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            )
        try:
            emptied = self._empty(name)
        except sa.exc.DBAPIError:
            emptied = False  # e.g. the test dropped alembic_version
        if emptied:
            self.free.append(name)
        else:
            self._drop(name)

    def _empty(self, name: str) -> bool:
        engine = sa.create_engine(normalise_url(self.url(name)), poolclass=sa.NullPool)
        try:
            with engine.begin() as conn:
                # DELETE, not TRUNCATE: truncating makes and syncs new files for every
                # table and index (0.5 to 1 s); foreign keys are off only while all goes
                for setting in _EMPTYING:
                    conn.execute(sa.text(f"SET LOCAL {setting}"))
                for table in conn.execute(sa.text(_TABLES)).scalars().all():
                    conn.execute(sa.text(f"DELETE FROM {table}"))
                conn.execute(sa.text(_RESTART))
                emptied = conn.execute(sa.text(_SHAPE)).scalar() == self.shape
            return emptied
        finally:
            engine.dispose()

    def _shape_of(self, name: str) -> str | None:
        engine = sa.create_engine(normalise_url(self.url(name)), poolclass=sa.NullPool)
        try:
            with engine.connect() as conn:
                return conn.execute(sa.text(_SHAPE)).scalar()
        finally:
            engine.dispose()

    def _has_rows(self, name: str) -> bool:
        engine = sa.create_engine(normalise_url(self.url(name)), poolclass=sa.NullPool)
        try:
            with engine.connect() as conn:
                tables = conn.execute(sa.text(_TABLES)).scalars().all()
                return any(
                    conn.execute(sa.text(f"SELECT EXISTS (SELECT 1 FROM {table})")).scalar()
                    for table in tables
                )
        finally:
            engine.dispose()

    def _drop(self, name: str) -> None:
        with self.admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.made.remove(name)

    def close(self) -> None:
        for name in list(self.made):
            self._drop(name)
        self.admin.dispose()


@pytest.fixture(scope="session")
def pg_databases(pg_template: str) -> Iterator[PgDatabases]:
    databases = PgDatabases(pg_template)
    yield databases
    databases.close()


@pytest.fixture
def pg_url(request: pytest.FixtureRequest, pg_databases: PgDatabases) -> Iterator[str]:
    fresh = request.node.get_closest_marker("fresh_database") is not None
    name = pg_databases.take(fresh=fresh)
    yield pg_databases.url(name)
    pg_databases.give_back(name, fresh=fresh)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated SQLite file per worker, which each test copies (migrating took about
    0.5 s a test)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "galley.db"
    store = Store(f"sqlite:///{path}")
    store.upgrade()
    store.dispose()
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    path = tmp_path / "galley.db"
    # SQLite's backup API: a consistent copy of the template, whatever its journal holds
    source, target = sqlite3.connect(sqlite_template), sqlite3.connect(path)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    return f"sqlite:///{path}"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh, migrated database: every store test runs on both backends."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    store = Store(db_url)
    yield store
    store.dispose()


@pytest.fixture
@slow_marks.starts_a_server
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
@slow_marks.starts_a_server
def worlds(fake_anthropic: FakeAnthropic) -> Iterator[Any]:
    """Publishing worlds (tests/harness/worlds.py): `worlds(db_url, target=…, defaults=…)`."""
    from tests.harness.worlds import world_factory  # it imports this module: import when used

    with world_factory(fake_anthropic) as make:
        yield make


@pytest.fixture
@slow_marks.starts_a_server
def start_bot(tmp_path: Path, fake_anthropic: FakeAnthropic) -> Iterator[Any]:
    """Slack review bots (tests/harness/slack_harness.py):
    `start_bot(db_url, slack=…, defaults=…)`."""
    from tests.harness.slack_harness import (
        harness_factory,  # it imports this module: import when used
    )

    with harness_factory(tmp_path, fake_anthropic) as start:
        yield start


@pytest.fixture
@slow_marks.starts_a_server
def bot_harness(tmp_path: Path, fake_anthropic: FakeAnthropic) -> Iterator[Any]:
    """Publishing bots driven over Slack (tests/harness/publishing_bots.py): `bot_harness(db_url,
    status_url=…, defaults=…)`."""
    from tests.harness.publishing_bots import bot_harness_factory  # imports this module: see above

    with bot_harness_factory(tmp_path, fake_anthropic) as start:
        yield start
