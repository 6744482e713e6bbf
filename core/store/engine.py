"""The database: engine set-up, short transactions and schema migrations.

Never hold a transaction across a network call (docs/design.md §6): callers open
`store.transaction()` around reads and writes only, and call the model or Slack outside.
A URL that is malformed, of an unsupported kind or unreachable is a `DatabaseUnavailable`
naming GALLEY_DATABASE_URL, never a driver traceback. Alembic loads only to migrate.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from core.errors import DatabaseNewer, DatabaseNotReady, DatabaseUnavailable

if TYPE_CHECKING:  # `galley status` reads through Core (read_core): no ORM at import
    from alembic.config import Config as AlembicConfig
    from sqlmodel import Session, SQLModel

MIGRATIONS = Path(__file__).with_name("migrations")
SQLITE_BUSY_TIMEOUT_MS = 30_000
SUPPORTED_BACKENDS = ("sqlite", "postgresql")
URL_VARIABLE = "GALLEY_DATABASE_URL"
_REVISION = re.compile(r"^revision\s*=\s*[\"']([^\"']+)[\"']", re.MULTILINE)
_DOWN_REVISION = re.compile(r"^down_revision\s*=\s*[\"']([^\"']+)[\"']", re.MULTILINE)
READ_ONLY = "galley_read_only"  # execution option of `Store.read()`'s connections
PING_AFTER_IDLE_S = 1.0  # PostgreSQL: a pooled connection idle this long is pinged first
_IDLE_SINCE = "galley_idle_since"  # the pool record's info key: when it was given back
Table = TypeVar("Table", bound="SQLModel")


def normalise_url(url: str) -> str:
    """`postgresql://…` means psycopg 3 here; SQLAlchemy would pick psycopg2."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url.removeprefix(prefix)
    return url


def check_url(url: str) -> sa.URL:
    """The parsed URL; `DatabaseUnavailable` if it is not one Galley can use."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise DatabaseUnavailable(
            f"{URL_VARIABLE}: {url!r} is not a database URL "
            "(use sqlite:///path/galley.db or postgresql://user@host/database)"
        ) from None
    if parsed.get_backend_name() not in SUPPORTED_BACKENDS:
        raise DatabaseUnavailable(
            f"{URL_VARIABLE}: {parsed.get_backend_name()!r} databases are not supported "
            "(use sqlite:///path/galley.db or postgresql://user@host/database)"
        )
    return parsed


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    check_url(url)
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        _configure_sqlite(engine)
        return engine
    engine = sa.create_engine(url, pool_size=10, max_overflow=10)
    _ping_after_idle(engine)
    return engine


def _ping_after_idle(engine: Engine) -> None:
    """Ping a pooled connection before use when it sat idle `PING_AFTER_IDLE_S` or more.

    A connection the server dropped (a restart, an idle timeout) is replaced before a
    transaction fails on it, as `pool_pre_ping` would; but a connection given back a
    moment ago (a draft's next transaction, milliseconds later) is not asked again:
    `pool_pre_ping` cost one round trip per transaction. A connection that dies while in
    use fails that transaction either way, and the pool then discards its connections.
    """

    @sa.event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @sa.event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.pop(_IDLE_SINCE, None)
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return  # a fresh connection, or one in use a moment ago
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as exc:
            if engine.dialect.is_disconnect(exc, dbapi_connection, None):
                raise sa.exc.DisconnectionError(str(exc)) from exc  # the pool reconnects
            raise


def _configure_sqlite(engine: Engine) -> None:
    """WAL, busy timeout, foreign keys, and BEGIN IMMEDIATE for every read-write transaction.

    A deferred transaction that reads and then writes cannot wait for the lock (SQLite
    answers "database is locked" at once), so every transaction that may write takes the
    write lock up front and waits up to the busy timeout instead. `Store.read()` begins
    deferred: under WAL a reader sees a snapshot and never holds up a writer.
    """

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # let SQLAlchemy's "begin" event decide
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        read_only = connection.get_execution_options().get(READ_ONLY, False)
        connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


class Store:
    """One database. Thread-safe: every `transaction()` gets its own session."""

    def __init__(self, url: str) -> None:
        self.url = normalise_url(url)
        self.engine = make_engine(self.url)
        options: dict[str, Any] = {READ_ONLY: True}
        if self.engine.dialect.name == "postgresql":
            options["postgresql_readonly"] = True  # a write in `read()` fails loudly
        self._reader = self.engine.execution_options(**options)
        self._one_reader = (  # PostgreSQL: a statement in autocommit is its own transaction
            self.engine.execution_options(isolation_level="AUTOCOMMIT")
            if self.engine.dialect.name == "postgresql"
            else self._reader
        )

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """One short transaction: commits on success, rolls back on any error."""
        from sqlmodel import Session

        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read-only transaction for passes and reports: one consistent snapshot that
        takes no write lock (SQLite: a deferred BEGIN; PostgreSQL: READ ONLY)."""
        from sqlmodel import Session

        with Session(self._reader, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def read_one(self) -> Iterator[Session]:
        """A read of one statement. PostgreSQL runs it in autocommit, as its own
        transaction, which spares BEGIN READ ONLY and COMMIT (two round trips on every
        draft: bench/draft_overhead.py measures them); at READ COMMITTED a read-only
        transaction gave it nothing more. SQLite: `read()`. Never write in it: on
        PostgreSQL the write would commit at once."""
        from sqlmodel import Session

        with Session(self._one_reader, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def read_core(self) -> Iterator[sa.Connection]:
        """`read()` as a Core connection, for reads that load no ORM (core/api/status_read.py)."""
        with self._reader.begin() as connection:
            yield connection

    def _alembic_config(self) -> AlembicConfig:
        from alembic.config import Config as AlembicConfig

        config = AlembicConfig()
        config.set_main_option("script_location", str(MIGRATIONS))
        return config

    def upgrade(self) -> None:
        """Bring the schema to the newest migration (safe to run from several processes);
        `DatabaseNewer` for a database a later Galley migrated, which is left as it is."""
        from alembic import command

        self.refuse_newer(self.current_revision())
        config = self._alembic_config()
        with self.reachable(), self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def current_revision(self) -> str | None:
        """The revision in `alembic_version`, read as Alembic does; None when unversioned.
        Through the read-only engine: /readyz asks often, and takes no write lock."""
        with self.reachable(), self._reader.connect() as connection:
            if not sa.inspect(connection).has_table("alembic_version"):
                return None
            versions = connection.execute(sa.text("SELECT version_num FROM alembic_version"))
            current = versions.scalar()
            return None if current is None else str(current)

    def head_revision(self) -> str | None:
        """The newest migration, read from the files' `revision` lines (no Alembic import);
        Alembic itself decides when the files do not form one chain."""
        revisions, parents = _migration_revisions()
        heads = revisions - parents
        if len(heads) == 1:
            return next(iter(heads))
        from alembic.script import ScriptDirectory

        head = ScriptDirectory.from_config(self._alembic_config()).get_current_head()
        return None if head is None else str(head)

    @contextmanager
    def reachable(self) -> Iterator[None]:
        """Connection failures become one line naming GALLEY_DATABASE_URL."""
        try:
            yield
        except sa.exc.OperationalError as exc:
            url = self.engine.url.set(drivername=self.engine.url.get_backend_name())
            shown = url.render_as_string(hide_password=True)
            cause = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
            raise DatabaseUnavailable(f"{URL_VARIABLE}: cannot use {shown}: {cause}") from exc

    def refuse_newer(self, current: str | None) -> None:
        """`DatabaseNewer` when `current` is no migration of this Galley's: a later
        Galley wrote it, and neither Alembic nor this code can read or migrate it."""
        if current is not None and current not in _migration_revisions()[0]:
            raise DatabaseNewer(
                f"the database is at revision {current}, newer than this Galley's "
                f"{self.head_revision()}: upgrade Galley"
            )

    def ensure_schema(self) -> None:
        """Upgrade an SQLite file or an empty database by itself; refuse a stale one,
        and one a later Galley migrated."""
        current = self.current_revision()
        if current == self.head_revision():
            return
        self.refuse_newer(current)
        if self.dialect == "sqlite" or (current is None and not self._has_tables()):
            self.upgrade()
            return
        raise DatabaseNotReady(
            f"database schema is at {current or 'nothing'}, not {self.head_revision()}: "
            "run `galley db upgrade`"
        )

    def _has_tables(self) -> bool:
        with self.reachable():
            return bool(sa.inspect(self.engine).get_table_names())

    def dispose(self) -> None:
        self.engine.dispose()


@cache
def _migration_revisions() -> tuple[frozenset[str], frozenset[str]]:
    """Every migration's revision, and every revision some migration follows, read from
    the files' lines (no Alembic import); they change only with the code."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        text = path.read_text()
        revisions.update(_REVISION.findall(text))
        parents.update(_DOWN_REVISION.findall(text))
    return frozenset(revisions), frozenset(parents)


def insert_ignore(
    session: Session, table: type[Any], *, binds: dict[str, Any] | None = None, **values: Any
) -> bool:
    """`INSERT … ON CONFLICT DO NOTHING`; True when this call inserted the row.

    The database decides who wins a key, in one statement: never check-then-insert. A
    value may be SQL (a subquery the INSERT evaluates): keep such an expression built
    once, with its own bind parameters given in `binds`.
    """
    statement = _insert_ignore_statement(session.get_bind().dialect.name, table)
    sql = {name: value for name, value in values.items() if isinstance(value, sa.ClauseElement)}
    if sql:
        statement = _with_sql_values(statement, sql)
        values = {name: value for name, value in values.items() if name not in sql}
    return session.execute(statement, values | (binds or {})).first() is not None


def insert_new(session: Session, table: type[Table], **values: Any) -> Table | None:
    """`INSERT … ON CONFLICT DO NOTHING RETURNING` every column: the row this call
    inserted, as the database stored it, and the session's own as though read back (no
    SELECT after the INSERT; the transaction holds its lock, having written it); None
    when the key was taken."""
    statement = _insert_ignore_statement(session.get_bind().dialect.name, table, every=True)
    stored = session.execute(statement, values).first()
    if stored is None:
        return None
    row = table(**stored._mapping)
    from sqlalchemy.orm import make_transient_to_detached

    make_transient_to_detached(row)  # committed state = what was read back: no history
    session.add(row)
    return row


def _with_sql_values(statement: Any, sql: dict[str, Any]) -> Any:
    """`statement` with SQL `sql` values, built once per expression object (the callers
    pass module-level expressions, so a key's `id` stays theirs)."""
    shape = (id(statement), *sorted((name, id(value)) for name, value in sql.items()))
    found = _WITH_SQL.get(shape)
    if found is None:
        if len(_WITH_SQL) >= 64:  # an expression built per call would grow this forever
            raise ValueError("insert_ignore: build SQL values once, at module level")
        found = _WITH_SQL.setdefault(shape, (statement.values(**sql), statement, sql))
    return found[0]


_WITH_SQL: dict[tuple[Any, ...], tuple[Any, Any, dict[str, Any]]] = {}  # holds what it keys
_INSERT_IGNORE: dict[tuple[str, type[Any], bool], Any] = {}


def _insert_ignore_statement(dialect: str, table: type[Any], *, every: bool = False) -> Any:
    """Built once per backend, table and RETURNING (the key, or `every` column), bound to
    each call's values: building the statement anew cost more than sending it."""
    shape = (dialect, table, every)
    statement = _INSERT_IGNORE.get(shape)
    if statement is not None:
        return statement
    insert: Any
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    # RETURNING, not rowcount: psycopg 3 reports -1 for this statement through SQLAlchemy.
    returned = table.__table__.columns if every else table.__table__.primary_key.columns
    statement = insert(table.__table__).on_conflict_do_nothing().returning(*returned)
    return _INSERT_IGNORE.setdefault(shape, statement)
