"""What used to end in a traceback ends in one line and exit 2 (docs/design.md §16): a
duration too long for any clock, a config file that is not UTF-8, and a database a later
Galley migrated, which every command refuses without changing it."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import Result
from typer.testing import CliRunner

from bot.cli import app
from core.store.engine import Store
from tests.conftest import config_text

EXIT_USAGE = 2
LATER_REVISION = "0999_from_a_later_galley"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "galley.toml"
    config.write_text(config_text())
    return {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'galley.db'}",
        "ANTHROPIC_API_KEY": "test-key",
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_APP_TOKEN": "xapp-test",
    }


def galley(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def assert_one_line(result: Result) -> str:
    """The refusal's one line on stderr, with exit 2 and no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == EXIT_USAGE, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_a_duration_too_long_for_any_clock_is_one_line_naming_the_key_and_the_longest(
    env: dict[str, str],
) -> None:
    Path(env["GALLEY_CONFIG"]).write_text(config_text(claim_lease="99999999999d"))
    line = assert_one_line(galley(env, "check"))
    assert line == (
        "[defaults]: claim_lease: bad duration '99999999999d': the longest accepted is 3650d"
    )


def test_a_config_file_that_is_not_utf8_is_one_line_naming_the_file_and_the_byte(
    env: dict[str, str],
) -> None:
    config = Path(env["GALLEY_CONFIG"])
    text = config_text().encode()
    offset = text.index(b"C0REVIEW")
    config.write_bytes(text[:offset] + b"\xff" + text[offset:])
    line = assert_one_line(galley(env, "check"))
    assert line == f"GALLEY_CONFIG: {config} is not UTF-8 text: byte {offset} is 0xff"


def _stamp_a_later_revision(url: str) -> None:
    """What a later Galley leaves: a table this one does not know, its revision stamped."""
    engine = sa.create_engine(Store(url).url)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE from_a_later_galley (id INTEGER PRIMARY KEY)"))
        connection.execute(sa.text(f"UPDATE alembic_version SET version_num = '{LATER_REVISION}'"))
    engine.dispose()


def _schema(url: str) -> tuple[list[str], list[str]]:
    """Every table and the stamped revision: what a migration would change."""
    engine = sa.create_engine(Store(url).url)
    with engine.connect() as connection:
        tables = sorted(sa.inspect(connection).get_table_names())
        versions = connection.execute(sa.text("SELECT version_num FROM alembic_version"))
        stamped = [str(version) for version in versions.scalars()]
    engine.dispose()
    return tables, stamped


@pytest.mark.parametrize(
    "args", [["check"], ["status"], ["runs"], ["db", "upgrade"], ["run"]], ids=" ".join
)
def test_a_database_a_later_galley_migrated_is_refused_naming_both_revisions_and_left_as_it_is(
    env: dict[str, str], db_url: str, args: list[str]
) -> None:
    head = Store(db_url).head_revision()
    _stamp_a_later_revision(db_url)
    before = _schema(db_url)

    line = assert_one_line(galley({**env, "GALLEY_DATABASE_URL": db_url}, *args))

    assert line == (
        f"the database is at revision {LATER_REVISION}, newer than this Galley's {head}: "
        "upgrade Galley"
    )
    assert _schema(db_url) == before
