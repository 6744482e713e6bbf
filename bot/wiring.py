"""How `galley run` builds the services that reach Slack and the publish destinations.
The bot and the tests' worlds build theirs here, so a test exercises the wiring the
bot runs, not a copy of it."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from bot.slack_publishing import SlackAlerter, SlackChannelPublisher
from bot.slack_surface import SlackChannels
from core.alerts import AlertService
from core.bluesky_publisher import BlueskyPublisher
from core.config import (
    BlueskyTarget,
    Config,
    MastodonTarget,
    PublishTarget,
    Recipe,
    SlackTarget,
    WebhookTarget,
)
from core.effects import EffectLedger
from core.linkedin_publisher import LinkedInPublisher
from core.mastodon_publisher import MastodonPublisher
from core.ports import Clock, Publisher
from core.publish_targets import PublisherFor
from core.publishing import PublishingService
from core.store import Store
from core.webhook_publisher import WebhookPublisher


class Publishers:
    """`publisher_for(recipe)`: the destinations of a recipe's approved drafts, built once
    per recipe and target and shared by every worker of the process. Credentials are read
    from `environ` (the process environment by default) when a call needs them."""

    def __init__(self, channels: SlackChannels, environ: Mapping[str, str] | None = None) -> None:
        self.channels = channels
        self.environ = environ
        self._built: dict[tuple[str, str], Publisher] = {}
        self._lock = threading.Lock()

    def __call__(self, recipe: Recipe) -> Publisher:
        """The first (or only) target's publisher, for single-target callers."""
        publishers = self.publishers_for(recipe)
        if not publishers:
            raise ValueError(f"{recipe.name} has no publish target")
        return publishers[0]

    def publishers_for(self, recipe: Recipe) -> list[Publisher]:
        """One publisher per target, in the order the recipe lists them."""
        with self._lock:
            found = []
            for target in recipe.targets:
                key = (recipe.name, target.model_dump_json())
                if key not in self._built:
                    self._built[key] = self._build(recipe, target)
                found.append(self._built[key])
            return found

    def _build(self, recipe: Recipe, target: PublishTarget) -> Publisher:
        timeout = recipe.call_timeout
        if isinstance(target, SlackTarget):
            return SlackChannelPublisher(self.channels, target.channel)
        if isinstance(target, WebhookTarget):
            return WebhookPublisher(target.url, target.status_url, timeout=timeout)
        if isinstance(target, BlueskyTarget):
            return BlueskyPublisher(target, timeout, self.environ)
        if isinstance(target, MastodonTarget):
            return MastodonPublisher(target, timeout, self.environ)
        return LinkedInPublisher(target, timeout, self.environ)

    def close(self) -> None:
        with self._lock:
            for publisher in self._built.values():
                close = getattr(publisher, "close", None)
                if close is not None:
                    close()
            self._built.clear()


@dataclass(frozen=True)
class PublishingServices:
    alerts: AlertService
    publishing: PublishingService


def publishing_services(
    store: Store,
    config: Config,
    clock: Clock,
    ledger: EffectLedger,
    channels: SlackChannels,
    publisher_for: PublisherFor,
) -> PublishingServices:
    """Alerts in the alert channel (else the review channel), and publishing that alerts
    people there when a run needs them."""
    alerts = AlertService(
        store,
        config,
        clock,
        ledger,
        SlackAlerter(channels, config.slack.alert_channel_or_review),
        reminder_every=config.slack.alert_reminder,
    )
    publishing = PublishingService(
        store, config, clock, ledger, publisher_for, alert=alerts.alert_run
    )
    return PublishingServices(alerts, publishing)
