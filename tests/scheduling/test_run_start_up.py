"""`galley run` that cannot start says why in Galley's own words: every
problem of the environment and the file at once, no library's lines before Galley's,
and a Slack that is down is called down, not a wrong URL."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from slack_sdk import WebClient

from bot.slack_check import check_slack
from core.errors import SlackUnavailable
from tests.conftest import config_text
from tests.fakes.slack_api import FakeSlack, error, rate_limited
from tests.harness.processes import GALLEY, galley_env
from tests.harness.slow_marks import starts_a_server
from tests.harness.timing import scaled

EXIT_USAGE = 2


@pytest.fixture
@starts_a_server
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


def client_of(slack: FakeSlack) -> WebClient:
    return WebClient(token="xoxb-test", base_url=slack.url + "/api/", retry_handlers=[])


def test_slack_busy_at_start_is_asked_again_briefly(slack: FakeSlack) -> None:
    slack.script("auth.test", error("service_unavailable", 503), rate_limited(0))
    waited: list[float] = []
    identity = check_slack(client_of(slack), waits=(0.01, 0.01, 0.01), sleep=waited.append)
    assert identity["ok"] is True
    assert len(waited) == 2
    assert len(slack.calls("auth.test")) == 3


def test_slack_down_throughout_is_called_unavailable_not_a_wrong_url(slack: FakeSlack) -> None:
    slack.script("auth.test", *[error("service_unavailable", 503)] * 4)
    with pytest.raises(SlackUnavailable) as caught:
        check_slack(client_of(slack), waits=(0, 0, 0), sleep=lambda _: None)
    [line] = str(caught.value).splitlines()
    assert line.startswith("Slack is unavailable: auth.test at ")
    assert "HTTP 503 (service_unavailable) 4 times" in line and "try again later" in line
    assert "GALLEY_SLACK_API_URL" not in line


def test_a_refusal_is_not_asked_again(slack: FakeSlack) -> None:
    slack.script("auth.test", error("invalid_auth"))
    with pytest.raises(SlackUnavailable, match="SLACK_BOT_TOKEN"):
        check_slack(client_of(slack), waits=(0, 0, 0), sleep=lambda _: None)
    assert len(slack.calls("auth.test")) == 1


# --- real processes ---------------------------------------------------------------------


def galley_run(tmp_path: Path, config: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "galley.toml"
    path.write_text(config)
    values = {
        "GALLEY_CONFIG": str(path),
        "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'galley.db'}",
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "test-secret",
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "GALLEY_HTTP_PORT": "0",
    } | env
    return subprocess.run(
        [str(GALLEY), "run"],
        env=galley_env(**values),
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )


@pytest.mark.slow
def test_environment_and_config_problems_are_reported_together(tmp_path: Path) -> None:
    bad_file = config_text().replace("Europe/London", "Mars/Olympus")
    result = galley_run(tmp_path, bad_file, SLACK_BOT_TOKEN="", ANTHROPIC_API_KEY="")
    assert result.returncode == EXIT_USAGE
    assert result.stderr.splitlines() == [
        "SLACK_BOT_TOKEN is not set: the bot token (xoxb-…) is required",
        "ANTHROPIC_API_KEY is not set: it is needed to draft",
        "[defaults]: timezone: unknown time zone 'Mars/Olympus'",
    ]


@pytest.mark.slow
def test_a_refused_app_token_is_galleys_one_line_with_no_bolt_lines_before_it(
    tmp_path: Path, slack: FakeSlack
) -> None:
    slack.script("apps.connections.open", error("invalid_auth"))
    result = galley_run(
        tmp_path,
        config_text(),
        GALLEY_SLACK_API_URL=slack.url + "/api/",
        SLACK_APP_TOKEN="xapp-test",
    )
    assert result.returncode == EXIT_USAGE
    assert result.stderr.splitlines() == [
        "SLACK_APP_TOKEN was refused by Slack (apps.connections.open: invalid_auth)"
    ]


@pytest.mark.slow
def test_slack_down_at_start_is_one_line_saying_so(tmp_path: Path, slack: FakeSlack) -> None:
    slack.script("auth.test", *[error("service_unavailable", 503)] * 10)
    result = galley_run(tmp_path, config_text(), GALLEY_SLACK_API_URL=slack.url + "/api/")
    assert result.returncode == EXIT_USAGE
    [line] = result.stderr.splitlines()
    assert line.startswith("Slack is unavailable: ") and "GALLEY_SLACK_API_URL" not in line


MASTODON_RECIPE = """
[[recipes]]
name = "toots"
platform = "mastodon"
schedule = "0 9 * * mon"
prompt = "Write."
publish = { to = "mastodon", instance = "http://127.0.0.1:9" }
"""


@pytest.mark.slow
def test_galley_run_refuses_to_start_without_a_targets_secret_naming_the_variable(
    tmp_path: Path,
) -> None:
    """As `galley check` does: a compose deployment would otherwise fail at its first
    approved post."""
    result = galley_run(tmp_path, config_text() + MASTODON_RECIPE, GALLEY_MASTODON_TOKEN="")
    assert result.returncode == EXIT_USAGE
    assert result.stderr.splitlines() == [
        "recipe 'toots': publish: GALLEY_MASTODON_TOKEN is not set: "
        "mastodon:127.0.0.1:9 needs it to publish"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "run"])
def test_a_target_whose_client_is_not_installed_is_refused_before_anything_runs(
    tmp_path: Path, command: str
) -> None:
    config = tmp_path / "galley.toml"
    config.write_text(config_text() + MASTODON_RECIPE)
    hide_client = (  # as if Mastodon.py were not installed
        "import sys; sys.modules['mastodon'] = None; sys.argv = ['galley', *sys.argv[1:]];"
        " from bot.launch import main; main()"
    )
    result = subprocess.run(
        [str(GALLEY.parent / "python"), "-c", hide_client, command],
        env=galley_env(
            GALLEY_CONFIG=str(config),
            GALLEY_DATABASE_URL=f"sqlite:///{tmp_path / 'galley.db'}",
            GALLEY_MASTODON_TOKEN="token",
            SLACK_BOT_TOKEN="xoxb-test",
            SLACK_SIGNING_SECRET="test-secret",
            ANTHROPIC_API_KEY="test-key",
            GALLEY_HTTP_PORT="0",
        ),
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert result.returncode == EXIT_USAGE, result.stderr
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert lines == [
        "recipe 'toots': publish: mastodon:127.0.0.1:9 needs the Mastodon.py client, which is"
        " not installed: install the bot's pinned requirements"
        " (uv pip install -r requirements.lock)"
    ]
