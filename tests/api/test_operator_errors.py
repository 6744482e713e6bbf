"""Operator errors are one line naming the variable or URL, exit 2 (docs/design.md §16).

Each case runs the real `galley` executable as a process and checks its exit code and
stderr: at most three lines, no traceback, the variable named. `--debug` (or
GALLEY_LOG_LEVEL=debug) shows the traceback.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PG_URL, config_text
from tests.fakes.server import closed_port
from tests.fakes.slack_api import FakeSlack, error
from tests.harness.processes import GALLEY, galley_env
from tests.harness.timing import scaled

pytestmark = pytest.mark.slow
EXIT_USAGE = 2


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "galley.toml"
    path.write_text(config_text())
    return path


def galley(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GALLEY), *args],
        env=galley_env(**env),
        capture_output=True,
        text=True,
        timeout=scaled(timeout),
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *names: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == EXIT_USAGE, result.stderr
    assert 1 <= len(lines) <= 3, result.stderr
    assert "Traceback" not in result.stderr
    for name in names:
        assert name in result.stderr, result.stderr


def pg_url_with(**parts: str | int) -> str:
    import sqlalchemy as sa

    assert PG_URL is not None
    return str(sa.make_url(PG_URL).set(**parts).render_as_string(hide_password=False))  # type: ignore[arg-type]


DATABASE_URLS = {
    "a directory that does not exist": "sqlite:////no/such/directory/galley.db",
    "not a URL": "notaurl",
    "an unsupported scheme": "mysql://galley@127.0.0.1/galley",
}


@pytest.mark.parametrize("url", DATABASE_URLS.values(), ids=DATABASE_URLS.keys())
def test_an_unusable_database_url_is_one_line_naming_it(config: Path, url: str) -> None:
    result = galley("status", GALLEY_CONFIG=str(config), GALLEY_DATABASE_URL=url)
    assert_one_line_error(result, "GALLEY_DATABASE_URL")


@pytest.mark.skipif(not PG_URL, reason="PostgreSQL: GALLEY_TEST_DATABASE_URL is not set")
@pytest.mark.parametrize("case", ["refused port", "missing database"])
def test_an_unreachable_postgresql_is_one_line_naming_the_url(config: Path, case: str) -> None:
    if case == "refused port":
        url = pg_url_with(port=closed_port())
    else:
        url = pg_url_with(database="galley_no_such_database")
    result = galley("status", GALLEY_CONFIG=str(config), GALLEY_DATABASE_URL=url)
    assert_one_line_error(result, "GALLEY_DATABASE_URL", "127.0.0.1")


def test_debug_shows_the_traceback(config: Path) -> None:
    env = {"GALLEY_CONFIG": str(config), "GALLEY_DATABASE_URL": "notaurl"}
    flagged = galley("--debug", "status", **env)
    by_level = galley("status", GALLEY_LOG_LEVEL="debug", **env)
    for result in (flagged, by_level):
        assert result.returncode == EXIT_USAGE
        assert "Traceback" in result.stderr
        assert "GALLEY_DATABASE_URL" in result.stderr.strip().splitlines()[-1]


def test_a_bad_environment_value_is_one_line_naming_the_variable(config: Path) -> None:
    result = galley("status", GALLEY_CONFIG=str(config), GALLEY_LOG_FORMAT="xml")
    assert_one_line_error(result, "GALLEY_LOG_FORMAT")


# --- galley run: Slack and the HTTP port ----------------------------------------------------


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


def run_env(config: Path, tmp_path: Path, slack_api_url: str, **more: str) -> dict[str, str]:
    return {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'galley.db'}",
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "test-secret",
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "GALLEY_SLACK_API_URL": slack_api_url,
        "GALLEY_HTTP_PORT": "0",
    } | more


def test_run_with_slack_unreachable_names_the_url(config: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/api/"
    result = galley("run", **run_env(config, tmp_path, url))
    assert_one_line_error(result, "GALLEY_SLACK_API_URL", url)


def test_run_with_a_refused_token_names_the_token_variable(
    config: Path, tmp_path: Path, slack: FakeSlack
) -> None:
    slack.script("auth.test", error("invalid_auth"))
    result = galley("run", **run_env(config, tmp_path, slack.url + "/api/"))
    assert_one_line_error(result, "SLACK_BOT_TOKEN", "invalid_auth")


def test_run_with_a_wrong_slack_url_says_the_url_looks_wrong(
    config: Path, tmp_path: Path, slack: FakeSlack
) -> None:
    wrong = slack.url + "/"  # no /api/: every method answers 404
    result = galley("run", **run_env(config, tmp_path, wrong))
    assert_one_line_error(result, "GALLEY_SLACK_API_URL", wrong)
    assert "SLACK_BOT_TOKEN" not in result.stderr


def test_run_with_the_http_port_taken_exits_at_once(
    config: Path, tmp_path: Path, slack: FakeSlack
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        env = run_env(config, tmp_path, slack.url + "/api/", GALLEY_HTTP_PORT=port)
        result = galley("run", timeout=30, **env)
    assert_one_line_error(result, "GALLEY_HTTP_PORT", port)


def test_run_with_a_refused_app_token_names_the_app_token_variable(
    config: Path, tmp_path: Path, slack: FakeSlack
) -> None:
    slack.script("apps.connections.open", error("invalid_auth"))
    env = run_env(config, tmp_path, slack.url + "/api/", SLACK_APP_TOKEN="xapp-test")
    result = galley("run", **env)
    assert_one_line_error(result, "SLACK_APP_TOKEN", "invalid_auth")
