"""How `galley run` builds the services that reach Slack and the publish destinations.
The bot and the tests' worlds build theirs here, so a test exercises the wiring the
bot runs, not a copy of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.slack_publishing import SlackAlerter, SlackChannelPublisher
from bot.slack_surface import SlackChannels
from core.alerts import AlertService
from core.config import Config
from core.destinations import Destinations
from core.effects import EffectLedger
from core.ports import Clock
from core.publish_targets import PublisherFor
from core.publishing import PublishingService
from core.store import Store


class Publishers(Destinations):
    """`publishers_for(recipe)`: the destinations of a recipe's approved drafts, Slack
    channels among them, built once per recipe and target and shared by every worker of
    the process. Credentials are read from `environ` (the process environment by
    default) when a call needs them."""

    def __init__(self, channels: SlackChannels, environ: Mapping[str, str] | None = None) -> None:
        super().__init__(lambda target: SlackChannelPublisher(channels, target.channel), environ)
        self.channels = channels


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
