"""Every destination of docs/design.md §24 behind the one `Publisher` port, built by the bot's
own wiring: one publisher per target, in order, its id safe inside an effect key."""

from __future__ import annotations

from pathlib import Path

from slack_sdk import WebClient
from typer.testing import CliRunner

from bot.cli import app
from bot.slack_publishing import SlackChannelPublisher
from bot.slack_surface import SlackChannels
from bot.wiring import Publishers
from core.identity import publish_effect_key
from core.publishing.platforms.bluesky import BlueskyPublisher
from core.publishing.platforms.linkedin import LinkedInOrganizationPublisher, LinkedInPublisher
from core.publishing.platforms.mastodon import MastodonPublisher
from core.publishing.platforms.webhook import WebhookPublisher
from core.setup.config import parse_config
from tests.conftest import config_text

EVERY_TARGET = """
[[recipes]]
name = "everywhere"
platform = "social"
schedule = "0 9 * * mon"
prompt = "Write."
publish = [
  { to = "slack", channel = "C0ANNOUNCE" },
  { to = "webhook", url = "http://127.0.0.1:9/hook" },
  { to = "bluesky", handle = "acme.bsky.social", service = "http://127.0.0.1:9" },
  { to = "mastodon", instance = "http://127.0.0.1:9" },
  { to = "linkedin", author = "urn:li:organization:123", api = "http://127.0.0.1:9/rest" },
]
"""


def test_each_target_gets_its_publisher_in_order_built_once() -> None:
    recipe = parse_config(config_text() + EVERY_TARGET).recipes["everywhere"]
    publishers = Publishers(SlackChannels(WebClient(token="xoxb-test")), environ={})
    built = publishers.publishers_for(recipe)
    kinds = [SlackChannelPublisher, WebhookPublisher, BlueskyPublisher, MastodonPublisher]
    assert [type(p) for p in built] == [*kinds, LinkedInOrganizationPublisher]  # read back
    assert [p.target for p in built] == [t.target for t in recipe.targets]
    assert publishers.publishers_for(recipe) == built  # shared, not rebuilt per pass
    assert publishers(recipe) is built[0]  # single-target callers get the first
    publishers.close()
    linkedin = built[-1]
    assert isinstance(linkedin, LinkedInPublisher) and linkedin._client.is_closed


def test_every_target_id_keeps_the_effect_key_readable() -> None:
    recipe = parse_config(config_text() + EVERY_TARGET).recipes["everywhere"]
    draft = "social|everywhere@2026-11-23T09:00|v1"
    for target in recipe.targets:
        key = publish_effect_key(draft, target.target)
        assert key.split("|")[:3] == draft.split("|") and len(key.split("|")) == 4, key


def test_each_destination_declares_its_limit_or_none() -> None:
    recipe = parse_config(config_text() + EVERY_TARGET).recipes["everywhere"]
    publishers = Publishers(SlackChannels(WebClient(token="xoxb-test")), environ={})
    text = "Ship it & <celebrate>!"
    fits = [p.fit(text) for p in publishers.publishers_for(recipe)]
    labelled = [(f.label, f.count, f.limit) if f else None for f in fits]
    assert labelled == [
        ("Slack", len("Ship it &amp; &lt;celebrate&gt;!"), 12_000),
        None,
        ("Bluesky", len(text), 300),
        ("Mastodon (127.0.0.1:9)", len(text), 500),  # the instance cannot be asked here
        ("LinkedIn", len(text), 3_000),
    ]
    publishers.close()


def test_galley_check_names_a_target_whose_secret_is_missing(tmp_path: Path) -> None:
    config = tmp_path / "galley.toml"
    config.write_text(config_text() + EVERY_TARGET)
    env = {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'g.db'}",
        "GALLEY_BLUESKY_PASSWORD": "app-pass",
        "GALLEY_MASTODON_TOKEN": None,
        "GALLEY_LINKEDIN_TOKEN": "token",
    }
    result = CliRunner().invoke(app, ["check"], env=env)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "recipe 'everywhere': publish: GALLEY_MASTODON_TOKEN is not set: "
        "mastodon:127.0.0.1:9 needs it to publish"
    ]
    env["GALLEY_MASTODON_TOKEN"] = "token"
    upgraded = CliRunner().invoke(app, ["db", "upgrade"], env=env)
    assert upgraded.exit_code == 0, upgraded.output
    assert CliRunner().invoke(app, ["check"], env=env).exit_code == 0
