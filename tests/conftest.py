"""Shared fixtures: one store contract over SQLite and PostgreSQL, fake APIs, configs.

PostgreSQL tests run when GALLEY_TEST_DATABASE_URL points at a server (CI sets it);
each test gets its own database cloned from a migrated template, as procrastinate does.
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


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    name = f"galley_test_{uuid.uuid4().hex[:10]}"
    admin = _admin_engine()
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"'))
    assert PG_URL is not None
    yield (
        sa.make_url(normalise_url(PG_URL)).set(database=name).render_as_string(hide_password=False)
    )
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


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
