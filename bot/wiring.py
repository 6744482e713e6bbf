"""How `galley run` builds its services: the container (`BotServices`, by `wire`) the
scheduler host, listeners, Home tab and commands take, and the services that reach
Slack and the publish destinations. The bot and the tests' worlds build theirs here,
so a test exercises the wiring the bot runs, not a copy of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from slack_sdk import WebClient

from bot.slack_publishing import SlackAlerter, SlackChannelPublisher
from bot.slack_surface import SlackChannels, SlackReviewSurface
from core.api.services import Services
from core.operations.alerts import AlertService
from core.operations.credential_watch import CredentialWatch, PublishersFor
from core.operations.poll_alerts import PollAlerts
from core.ports import Clock, Directory, Publisher
from core.publishing.destinations import Destinations
from core.publishing.readings import PostReadings
from core.publishing.service import PublishingService
from core.publishing.targets import PublisherFor
from core.review.facts import AnnotatedReviewSurface
from core.review.outbox import ReviewOutbox
from core.scheduling.items import ItemPoller
from core.setup.config import Config, Recipe
from core.store.effects import EffectLedger
from core.store.engine import Store


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
    poll_alerts: PollAlerts  # items recipes whose source fails (docs/design.md §29)
    credentials: CredentialWatch  # credentials proved before a slot (docs/design.md §36)


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
    alerter = SlackAlerter(channels, config.slack.alert_channel_or_review)
    alerts = AlertService(
        store, config, clock, ledger, alerter, reminder_every=config.slack.alert_reminder
    )
    publishing = PublishingService(
        store, config, clock, ledger, publisher_for, alert=alerts.alert_run
    )
    polls = PollAlerts(store, config, clock, ledger, alerter)
    credentials = CredentialWatch(store, config, clock, ledger, alerter, _listed(publisher_for))
    return PublishingServices(alerts, publishing, polls, credentials)


def _listed(publisher_for: PublisherFor) -> PublishersFor:
    """A recipe's publishers as a list, one or many."""

    def listed(recipe: Recipe) -> Sequence[Publisher]:
        found = publisher_for(recipe)
        return list(found) if isinstance(found, Sequence) else [found]

    return listed


@dataclass(frozen=True)
class BotServices:
    """The bot's own services, built once by `wire`: core's container (`core`: drafting,
    settling runs, recipe changes, who acts, with Slack's user groups) and what reaches
    Slack and the destinations. The scheduler host, the listeners, the Home tab and the
    commands take this (or its `core`), never the notebook's `Galley`."""

    core: Services
    client: WebClient
    channels: SlackChannels  # paced, classified Web API calls
    publishers: Publishers
    ledger: EffectLedger
    outbox: ReviewOutbox
    alerts: AlertService
    publishing: PublishingService
    readings: PostReadings
    poll_alerts: PollAlerts  # published posts read back and counted (docs/design.md §28)
    items: ItemPoller  # polls of items recipes, each told to `poll_alerts` as it happens
    credentials: CredentialWatch  # warnings before a slot fails (docs/design.md §36)

    @property
    def directory(self) -> Directory:
        return self.core.directory


def wire(
    core: Services, publishers: Publishers, *, call_timeout: timedelta, heartbeat: timedelta
) -> BotServices:
    """`core` built over `publishers` (its fit rule measures Slack channels too): the
    annotated review surface, one effect ledger on the drafting worker's name, alerts,
    the outbox and publishing."""
    config, slack, channels = core.config, core.config.slack, publishers.channels
    surface = AnnotatedReviewSurface(  # near-duplicates, the record, each fit
        SlackReviewSurface(channels, slack.review_channel),
        core.store,
        config,
        core.clock,
        core.fits,
    )
    ledger = EffectLedger(core.store, core.clock, core.drafting.worker, heartbeat)
    services = publishing_services(
        core.store, config, core.clock, ledger, channels, publishers.publishers_for
    )
    outbox = ReviewOutbox(
        core.store,
        ledger,
        surface,
        channel=slack.review_channel,
        call_lease=call_timeout * 4,
        on_wire=call_timeout,
        unfindable=services.alerts.alert_review_post,
        gone=services.alerts.alert_review_gone,
    )
    readings = PostReadings(
        core.store,
        config,
        core.clock,
        core.drafting.worker,
        publishers.publishers_for,
        services.alerts.alert_post_gone,
    )
    items = ItemPoller(core.store, core.drafting, core.clock, told=services.poll_alerts.tell)
    client = channels.client
    return BotServices(
        core,
        client,
        channels,
        publishers,
        ledger,
        outbox,
        services.alerts,
        services.publishing,
        readings,
        services.poll_alerts,
        items,
        services.credentials,
    )
