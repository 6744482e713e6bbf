"""How `galley run` builds the services that reach Slack and the publish destinations.
The bot and the tests' worlds build theirs here, so a test exercises the wiring the
bot runs, not a copy of it."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from bot.slack_publishing import SlackAlerter, SlackChannelPublisher
from bot.slack_surface import SlackChannels
from core.alerts import AlertService
from core.config import Config, PublishTarget, Recipe, SlackTarget, WebhookTarget
from core.effects import EffectLedger
from core.ports import Clock, Publisher
from core.publishing import PublisherFor, PublishingService
from core.store import Store
from core.webhook_publisher import WebhookPublisher


class Publishers:
    """`publisher_for(recipe)`: the destination of a recipe's approved drafts, built once
    per recipe and target and shared by every worker of the process."""

    def __init__(self, channels: SlackChannels) -> None:
        self.channels = channels
        self._built: dict[tuple[str, str], Publisher] = {}
        self._lock = threading.Lock()

    def __call__(self, recipe: Recipe) -> Publisher:
        target = recipe.publish
        if target is None:
            raise ValueError(f"{recipe.name} has no publish target")
        key = (recipe.name, target.model_dump_json())
        with self._lock:
            if key not in self._built:
                self._built[key] = self._build(recipe, target)
            return self._built[key]

    def _build(self, recipe: Recipe, target: PublishTarget) -> Publisher:
        if isinstance(target, SlackTarget):
            return SlackChannelPublisher(self.channels, target.channel)
        if isinstance(target, WebhookTarget):
            return WebhookPublisher(target.url, target.status_url, timeout=recipe.call_timeout)
        raise NotImplementedError(f"no publisher for {target.to} yet")

    def close(self) -> None:
        with self._lock:
            for publisher in self._built.values():
                if isinstance(publisher, WebhookPublisher):
                    publisher.close()
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
