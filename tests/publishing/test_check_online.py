"""`galley check --online` proves each destination's credentials against its service
without posting (docs/design.md §24): Slack's auth.test, Bluesky signs in, Mastodon
verifies the token, LinkedIn reads one post of the author, Discord reads the bot and
the channel. One line per target; exit 2
on any failure. Against the fakes over real HTTP, with the real clients.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.conftest import config_text
from tests.fakes import bluesky, discord, linkedin, mastodon
from tests.fakes.anthropic_api import REFUSED_KEY, FakeAnthropic
from tests.fakes.bluesky import FakeBluesky
from tests.fakes.discord import FakeDiscord
from tests.fakes.linkedin import FakeLinkedIn
from tests.fakes.mastodon import FakeMastodon
from tests.fakes.server import closed_port
from tests.fakes.slack_api import FakeSlack


@dataclass
class Services:
    slack: FakeSlack
    bluesky: FakeBluesky
    mastodon: FakeMastodon
    linkedin: FakeLinkedIn
    anthropic: FakeAnthropic
    discord: FakeDiscord
    mastodon_url: str = ""  # where the recipe's Mastodon target points (default: the fake)

    def recipe(self) -> str:
        return f"""
[[recipes]]
name = "everywhere"
platform = "social"
schedule = "0 9 * * mon"
prompt = "Write."
publish = [
  {{ to = "slack", channel = "C0ANNOUNCE" }},
  {{ to = "bluesky", handle = "{bluesky.HANDLE}", service = "{self.bluesky.url}" }},
  {{ to = "mastodon", instance = "{self.mastodon_url or self.mastodon.url}" }},
  {{ to = "linkedin", author = "{linkedin.ORGANIZATION}", api = "{self.linkedin.api}" }},
  {{ to = "linkedin", author = "{linkedin.PERSON}", api = "{self.linkedin.api}" }},
  {{ to = "discord", channel = "{discord.CHANNEL_ID}", api = "{self.discord.api}" }},
]
"""

    def posts(self) -> int:
        fakes = (self.bluesky, self.mastodon, self.linkedin, self.discord)
        return sum(len(fake.posts) for fake in fakes)


@pytest.fixture
def services(fake_anthropic: FakeAnthropic) -> Iterator[Services]:
    with (
        FakeBluesky() as sky,
        FakeMastodon() as toot,
        FakeLinkedIn() as page,
        FakeDiscord() as channel,
    ):
        slack = FakeSlack().start()
        try:
            yield Services(slack, sky, toot, page, fake_anthropic, channel)
        finally:
            slack.stop()


def check_online(
    tmp_path: Path, services: Services, **secrets: str | None
) -> tuple[int, list[str]]:
    config = tmp_path / "galley.toml"
    config.write_text(config_text() + services.recipe())
    env: dict[str, str | None] = {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'g.db'}",
        "SLACK_BOT_TOKEN": "xoxb-test",
        "GALLEY_SLACK_API_URL": services.slack.url + "/api/",
        "GALLEY_BLUESKY_PASSWORD": bluesky.PASSWORD,
        "GALLEY_MASTODON_TOKEN": mastodon.TOKEN,
        "GALLEY_LINKEDIN_TOKEN": linkedin.TOKEN,
        "GALLEY_DISCORD_TOKEN": discord.TOKEN,
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": services.anthropic.url,
    } | secrets
    assert CliRunner().invoke(app, ["db", "upgrade"], env=env).exit_code == 0
    result = CliRunner().invoke(app, ["check", "--online"], env=env)
    return result.exit_code, result.output.strip().splitlines()


def test_every_destination_is_proved_one_line_each_and_nothing_is_posted(
    tmp_path: Path, services: Services
) -> None:
    code, lines = check_online(tmp_path, services)
    assert code == 0, lines
    assert [line.split(": ")[0] for line in lines] == [
        "slack",
        "anthropic",
        f"bluesky:{bluesky.HANDLE}",
        f"mastodon:{services.mastodon.url.removeprefix('http://')}",
        f"linkedin:{linkedin.ORGANIZATION}",
        f"linkedin:{linkedin.PERSON}",
        f"discord:{discord.CHANNEL_ID}",
    ]
    assert all(": ok: " in line for line in lines), lines
    assert services.posts() == 0
    assert services.bluesky.sessions_created() == 1  # the app password, proved by signing in
    assert services.mastodon.requests_to("/api/v1/accounts/verify_credentials")
    assert not services.mastodon.requests_to("/api/v1/statuses", "POST")
    assert services.discord.requests_to("/users/@me", "GET")
    assert services.slack.calls("auth.test")
    paths = [r.path.partition("?")[0] for r in services.anthropic.requests]
    assert paths == ["/v1/models"]  # one read, and no tokens spent


def test_a_refused_credential_is_its_targets_line_and_exit_2(
    tmp_path: Path, services: Services
) -> None:
    code, lines = check_online(
        tmp_path,
        services,
        GALLEY_MASTODON_TOKEN="wrong",
        GALLEY_LINKEDIN_TOKEN="wrong",
        GALLEY_DISCORD_TOKEN="wrong",
    )
    assert code == 2, lines
    failed = [line for line in lines if ": FAILED: " in line]
    assert [line.split(": ")[0].split(":")[0] for line in failed] == [
        "mastodon",
        "linkedin",
        "linkedin",
        "discord",
    ]
    assert all("GALLEY_DISCORD_TOKEN" in line for line in failed if line.startswith("discord"))
    assert all("GALLEY_MASTODON_TOKEN" in line for line in failed if line.startswith("mastodon"))
    assert all("GALLEY_LINKEDIN_TOKEN" in line for line in failed if line.startswith("linkedin"))
    assert services.posts() == 0


def test_a_refused_anthropic_key_is_its_own_line(tmp_path: Path, services: Services) -> None:
    code, lines = check_online(tmp_path, services, ANTHROPIC_API_KEY=REFUSED_KEY)
    assert code == 2
    [failed] = [line for line in lines if ": FAILED: " in line]
    assert failed.startswith("anthropic: FAILED: Anthropic refused ANTHROPIC_API_KEY (401)")


def test_an_unreachable_instance_is_not_blamed_on_the_token(
    tmp_path: Path, services: Services
) -> None:
    services.mastodon_url = f"http://127.0.0.1:{closed_port()}"
    code, lines = check_online(tmp_path, services)
    assert code == 2
    [failed] = [line for line in lines if ": FAILED: " in line]
    assert "is unreachable" in failed and "GALLEY_MASTODON_TOKEN" not in failed


def test_a_server_that_is_not_mastodon_does_not_pass(tmp_path: Path, services: Services) -> None:
    services.mastodon_url = services.linkedin.url  # answers, but not as Mastodon does
    code, lines = check_online(tmp_path, services)
    assert code == 2
    [failed] = [line for line in lines if ": FAILED: " in line]
    assert failed.startswith("mastodon:") and "is it a Mastodon server?" in failed
    assert "@None" not in failed
