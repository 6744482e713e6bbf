"""Dates known ahead that will fail a publication (docs/design.md §36): a `LinkedIn-Version`
within two months of its retirement (a year after its release) is warned about in
`galley check` and the daily digest; a LinkedIn token's expiry from
`GALLEY_LINKEDIN_TOKEN_EXPIRES` shows in `galley status`. The commands read the real
clock, so their versions and dates are made from today; the rest takes a fixed day.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from bot.cli import app
from bot.digest_text import digest_text
from core.operations.digest import build_digest
from core.publishing.known_expiry import (
    expiry_warnings,
    known_expiries,
    version_retires,
    version_warnings,
)
from core.setup.config import Config, parse_config
from core.store.engine import Store
from tests.conftest import config_text

AUTHOR = "urn:li:organization:1"
TARGET = f"linkedin:{AUTHOR}"
TOKEN = {"GALLEY_LINKEDIN_TOKEN": "li-token"}


def linkedin_text(version: str) -> str:
    publish = f'publish = {{ to = "linkedin", author = "{AUTHOR}", version = "{version}" }}'
    return re.sub(r"^(prompt = .*)$", rf"\1\n{publish}", config_text(), flags=re.M)


def linkedin_config(version: str) -> Config:
    return parse_config(linkedin_text(version))


def months_before(day: date, months: int) -> str:
    """The YYYYMM version released `months` before `day`'s month."""
    index = day.year * 12 + day.month - 1 - months
    return f"{index // 12:04d}{index % 12 + 1:02d}"


def test_a_version_retires_a_year_after_its_release_and_is_warned_two_months_ahead() -> None:
    assert version_retires("202511") == date(2026, 11, 1)
    assert version_retires("202601.01") == date(2027, 1, 1)
    config = linkedin_config("202511")
    assert version_warnings(config, date(2026, 8, 31)) == []  # three months ahead
    [soon] = version_warnings(config, date(2026, 9, 1))
    assert TARGET in soon and "202511 retires 2026-11-01" in soon and "`version`" in soon
    [gone] = version_warnings(config, date(2026, 11, 2))
    assert "202511 retired 2026-11-01" in gone


def test_a_token_expiry_is_read_from_its_variable_and_warned_seven_days_ahead() -> None:
    config = linkedin_config("202601")
    env = {"GALLEY_LINKEDIN_TOKEN_EXPIRES": "2026-12-01"}
    [expiry] = known_expiries(config, env)
    assert (expiry.target, expiry.expires) == (TARGET, date(2026, 12, 1))
    assert expiry_warnings(config, date(2026, 11, 23), env) == []  # 8 days ahead
    [warning] = expiry_warnings(config, date(2026, 11, 24), env)
    assert "expires 2026-12-01 (in 7 day(s))" in warning and "GALLEY_LINKEDIN_TOKEN" in warning
    assert known_expiries(config, {}) == []  # not known: nothing said
    [unreadable] = expiry_warnings(config, date(2026, 11, 24), {expiry.variable: "soon"})
    assert "is not a date" in unreadable


def test_galley_check_warns_of_a_version_near_its_retirement(tmp_path: Path, db_url: str) -> None:
    today = datetime.now(UTC).date()
    path = tmp_path / "galley.toml"
    env = {"GALLEY_CONFIG": str(path), "GALLEY_DATABASE_URL": db_url} | TOKEN
    Store(db_url).upgrade()

    path.write_text(linkedin_text(months_before(today, 11)))  # retires next month
    result = CliRunner().invoke(app, ["check"], env=env)
    assert result.exit_code == 0, result.output
    assert f"warning: {TARGET}: LinkedIn-Version {months_before(today, 11)}" in result.output
    as_json = CliRunner().invoke(app, ["check", "--json"], env=env)
    [warning] = json.loads(as_json.stdout)["warnings"]
    assert "retires" in warning

    path.write_text(linkedin_text(months_before(today, 0)))  # this month's: a year left
    fresh = CliRunner().invoke(app, ["check"], env=env)
    assert fresh.exit_code == 0 and "warning" not in fresh.output


def test_galley_status_shows_a_known_token_expiry(tmp_path: Path, db_url: str) -> None:
    today = datetime.now(UTC).date()
    path = tmp_path / "galley.toml"
    path.write_text(linkedin_text(months_before(today, 0)))
    expires = (today + timedelta(days=20)).isoformat()
    env = {"GALLEY_CONFIG": str(path), "GALLEY_DATABASE_URL": db_url} | TOKEN
    env["GALLEY_LINKEDIN_TOKEN_EXPIRES"] = expires
    Store(db_url).upgrade()
    result = CliRunner().invoke(app, ["status"], env=env)
    assert result.exit_code == 0, result.output
    assert f"{TARGET}: token expires {expires} (in 20 day(s))" in result.output
    as_json = CliRunner().invoke(app, ["status", "--json"], env=env)
    assert json.loads(as_json.stdout)["expiries"] == [
        f"{TARGET}: token expires {expires} (in 20 day(s))"
    ]


def test_the_digest_warns_of_a_version_near_its_retirement(store: Store) -> None:
    config = linkedin_config("202511")
    text = digest_text(build_digest(store, config, datetime(2026, 10, 5, 9, 0, tzinfo=UTC)))
    assert f":warning: {TARGET}: LinkedIn-Version 202511 retires 2026-11-01" in text
    quiet = digest_text(build_digest(store, config, datetime(2026, 8, 5, 9, 0, tzinfo=UTC)))
    assert "LinkedIn-Version" not in quiet
