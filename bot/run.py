"""`galley run`: the scheduler, the Slack app, the review outbox and the HTTP server
in one process, its periodic passes registered from one table (`Bot.passes`). It refuses to
start half-configured, and on SIGTERM it stops new work, lets running model calls finish
up to a deadline, and exits; what is left is taken up by the next start, never redone.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import uvicorn
from slack_bolt import App

from bot.apscheduler_host import SchedulerHost
from bot.blocks import notice_blocks
from bot.digest_text import digest_text
from bot.handlers import register
from bot.home_tab import HomeTab
from bot.inbound import SlackEvents
from bot.passes import DIGEST_GRACE, Every, Pass, trigger_for
from bot.pools import Pool
from bot.report_text import report_blocks, report_text
from bot.server import timed_ack, web_app
from bot.slack_check import check_slack
from bot.slack_surface import (
    CountedWebClient,
    SlackChannels,
    SlackDirectory,
    SlackReviewSurface,
)
from bot.socket_link import SocketLink
from bot.wiring import Publishers, wire
from bot.work import Work
from core.api.report import Report
from core.api.services import Services
from core.api.weekly_report import post_weekly_report, report_week
from core.errors import ConfigError, GalleyError, PortUnavailable
from core.operations.digest import Digest, post_digest
from core.operations.gauges import watch_database
from core.ports import Clock, MessageRef
from core.publishing.platforms.online_check import CredentialProof, prove_targets
from core.review.reminders import remind_waiting
from core.setup.config import load_config
from core.setup.serving import unserved
from core.setup.settings import Settings
from core.store.deliveries import DeliveryBook, forget_old_deliveries

log = logging.getLogger("galley")
DEFAULT_CALL_TIMEOUT = timedelta(seconds=30)
DEFAULT_HEARTBEAT = timedelta(seconds=2)


def missing_settings(settings: Settings) -> list[str]:
    """Every variable `galley run` needs and does not have, one line each."""
    problems = []
    if not settings.slack_bot_token:
        problems.append("SLACK_BOT_TOKEN is not set: the bot token (xoxb-…) is required")
    if not settings.slack_app_token and not settings.slack_signing_secret:
        problems.append(
            "neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (HTTP mode) is set"
        )
    if not settings.anthropic_api_key:
        problems.append("ANTHROPIC_API_KEY is not set: it is needed to draft")
    return problems


def _secret(value: Any) -> str:
    return str(value.get_secret_value()) if value else ""


class Bot:
    """Everything `galley run` starts, wired together; `serve()` blocks until a signal."""

    def __init__(
        self,
        settings: Settings,
        *,
        housekeeping_every: timedelta = timedelta(seconds=60),
        outbox_every: timedelta = timedelta(seconds=2),
        shutdown_grace: timedelta = timedelta(seconds=30),
        clock: Clock | None = None,
        sweep_every: timedelta | None = None,
        outbox_at_start: bool = True,
    ) -> None:
        problems = missing_settings(settings)
        try:  # the file's problems too, in the same answer: never one fix at a time
            # and every target it cannot serve (a secret unset, a client not installed):
            # refused now, not at the first approved post
            problems += unserved(load_config(settings.galley_config))
        except ConfigError as exc:
            problems += exc.problems
        if problems:
            raise ConfigError(problems)
        self.settings = settings
        self.shutdown_grace = shutdown_grace
        config = load_config(settings.galley_config)
        recipes = list(config.recipes.values())
        call_timeout = min((r.call_timeout for r in recipes), default=DEFAULT_CALL_TIMEOUT)
        self.client = CountedWebClient(
            token=_secret(settings.slack_bot_token),
            base_url=settings.galley_slack_api_url,
            timeout=int(call_timeout.total_seconds()),
            retry_handlers=[],  # no blind re-sends: Galley decides what may be repeated
        )
        publishers = Publishers(SlackChannels(self.client))  # every target, Slack's too
        core = Services.from_settings(  # Slack's user groups count in approvers and admins
            settings, clock=clock, directory=SlackDirectory(self.client), destinations=publishers
        )
        watch_database(core.store, core.config, core.clock)  # /metrics
        self.slack_identity = check_slack(self.client)  # before Bolt: errors name the variable
        heartbeat = min((r.heartbeat for r in recipes), default=DEFAULT_HEARTBEAT)
        self.services = wire(core, publishers, call_timeout=call_timeout, heartbeat=heartbeat)
        self.core = core
        self.host = SchedulerHost(core, items=self.services.items)
        self.work = Work(self.services, self.host)
        self.services.outbox.when_posted(self.work.describe_source_images_soon)
        self.batches = core.batch_pass(later=self.host.drafting.take)
        self.surface = SlackReviewSurface(self.services.channels, core.config.slack.review_channel)
        self.bolt = App(
            client=self.client,
            signing_secret=_secret(settings.slack_signing_secret),
            request_verification_enabled=not settings.slack_app_token,
            process_before_response=False,
        )
        self.home = HomeTab(core, self.client)
        sweep = sweep_every or (heartbeat if recipes else housekeeping_every)
        intervals = {
            Every.OUTBOX: outbox_every,
            Every.SWEEP: sweep,
            Every.HOUSEKEEPING: housekeeping_every,
        }
        self.schedule_passes(intervals, outbox_at_start=outbox_at_start)
        if settings.slack_app_token:
            self.bolt.use(timed_ack)  # HTTP mode times acks at /slack/events instead
        register(self.bolt, self.work, self.home)
        self._stop = threading.Event()
        self._server: uvicorn.Server | None = None
        self._http_thread: threading.Thread | None = None
        self._socket: SocketLink | None = None

    def passes(self) -> tuple[Pass, ...]:
        """Every periodic pass, by what it calls; a pass whose part is missing (no batch
        pass without ANTHROPIC_API_KEY) or whose cadence is off (no digest) is not
        scheduled. A new pass is one row here."""
        batches = self.batches.run_once if self.batches is not None else None
        return (
            Pass("outbox", self.sync_slack, Every.OUTBOX, Pool.SLACK),
            Pass("reconciler", self.reconcile, Every.OUTBOX, Pool.SLACK),
            # Home's own pass, so a failing outbox pass never leaves Home tabs stale
            Pass("home", self.home.refresh_recent, Every.OUTBOX, Pool.SLACK),
            Pass("batches", batches, Every.OUTBOX, Pool.SLACK),  # docs/design.md §21
            Pass("digest", self.post_digest, Every.DIGEST, Pool.SLACK),
            Pass("report", self.post_report, Every.REPORT, Pool.SLACK),
            Pass("sweeper", self.host.sweep_claims, Every.SWEEP, Pool.HOUSEKEEPING),
            # docs/design.md §22
            Pass("redrafts", self.work.resume_redrafts, Every.SWEEP, Pool.HOUSEKEEPING),
            Pass("pending", self.host.settle_stale_pending, Every.HOUSEKEEPING, Pool.HOUSEKEEPING),
            Pass("expiry", self.host.expire, Every.HOUSEKEEPING, Pool.HOUSEKEEPING),
            Pass("deliveries", self.forget_deliveries, Every.HOUSEKEEPING, Pool.HOUSEKEEPING),
            # docs/design.md §35: remind_after
            Pass("reminders", self.remind_reviewers, Every.OUTBOX, Pool.SLACK),
            # published posts read back and counted (docs/design.md §28)
            Pass("readings", self.services.readings.read_due, Every.HOUSEKEEPING, Pool.SLACK),
            # docs/design.md §36: credentials proved before a slot, warning while there is time
            Pass("credentials", self.services.credentials.sweep, Every.HOUSEKEEPING, Pool.SLACK),
        )

    def schedule_passes(
        self, intervals: dict[Every, timedelta], *, outbox_at_start: bool = True
    ) -> None:
        """Every pass of `passes` whose part and cadence are there, on its pool. The
        outbox's passes run first as the scheduler starts, so what a restart finds due to
        publish or to show goes at once (`outbox_at_start=False`: a caller that drives the
        passes itself)."""
        for job, runs, every, pool in self.passes():
            trigger = trigger_for(every, intervals, self.core.config.slack)
            if runs is not None and trigger is not None:
                grace = DIGEST_GRACE if every in (Every.DIGEST, Every.REPORT) else None
                at_start = outbox_at_start and every == Every.OUTBOX
                self.host.add_pass(job, runs, trigger, pool, grace=grace, at_start=at_start)

    # --- the passes of `passes` that are the bot's own ------------------------------------

    def reconcile(self) -> None:
        """Publish approved runs, look again at uncertain ones, alert people where needed."""
        try:
            self.services.publishing.publish_pending()
        finally:
            self.services.alerts.sweep()
            self.services.alerts.settle_resolved()
            self.services.poll_alerts.sweep()

    def remind_reviewers(self) -> None:
        """Reminders and escalations due now, in their review messages' threads."""
        core = self.core
        remind_waiting(core.store, core.config, core.clock, self.services.ledger, self.surface)

    def forget_deliveries(self) -> None:
        """Inbound deliveries old enough that Slack no longer retries them."""
        forget_old_deliveries(self.core.store, self.core.clock.now())

    def post_digest(self) -> bool:
        """Today's digest in the alert channel, once per day across replicas."""
        channel = self.core.config.slack.alert_channel_or_review

        def post(digest: Digest) -> MessageRef:
            text = digest_text(digest)
            return self.services.channels.post(channel, text=text, blocks=notice_blocks(text))

        core = self.core
        return post_digest(core.store, core.config, self.services.ledger, core.clock.now(), post)

    def post_report(self) -> bool:
        """This week's report in the alert channel, once per week across replicas."""
        channel, core = self.core.config.slack.alert_channel_or_review, self.core
        now = core.clock.now()
        week, channels = report_week(core.config, now), self.services.channels

        def post(found: Report) -> MessageRef:
            text, blocks = report_text(found, week), report_blocks(found, week)
            return channels.post(channel, text=text, blocks=blocks)

        return post_weekly_report(core.store, core.config, self.services.ledger, now, post)

    def sync_slack(self) -> None:
        """The outbox pass: post new drafts, refresh decided ones, tell of backpressure.
        A step that fails is logged and does not keep the others from running."""
        limits = {name: r.pending_limit for name, r in self.core.config.recipes.items()}
        outbox = self.services.outbox
        steps: list[tuple[str, Callable[[], object]]] = [
            ("posting ready drafts", outbox.post_ready_drafts),
            ("updating review messages", outbox.sync_messages),
            ("showing approvals so far", outbox.show_approvals),
            ("backpressure notices", lambda: outbox.announce_backpressure(limits)),
        ]
        for name, step in steps:
            try:
                step()
            except Exception:
                log.exception("outbox: %s failed; the next pass tries again", name)

    def ready(self) -> tuple[bool, str]:
        """Ready once the scheduler runs, Slack answered auth.test and the database
        answers now (its schema at the newest revision)."""
        if self._stop.is_set():
            return False, "stopping"
        if not self.host.scheduler.running:
            return False, "starting: scheduler not running yet"
        if not self.slack_identity:
            return False, "slack: auth.test has not answered"
        try:
            revision = self.core.store.current_revision()
        except GalleyError as exc:
            return False, f"database: {exc}"
        if revision != self.core.store.head_revision():
            return False, f"database: schema at {revision}, not the newest"
        if self._socket is not None and not self._socket.is_connected():
            return False, "socket mode: disconnected"
        return True, "scheduler running, slack and database answered"

    def bind_http(self) -> socket.socket:
        """The HTTP port, bound now: a port taken is an error at start, not a log line
        from a server thread that dies while the bot carries on without health checks."""
        host, port = self.settings.galley_http_host, self.settings.galley_http_port
        listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((host, port))
        except OSError as exc:
            listener.close()
            raise PortUnavailable(
                f"GALLEY_HTTP_HOST/GALLEY_HTTP_PORT: cannot listen on {host}:{port} "
                f"({exc.strerror or exc})"
            ) from None
        listener.set_inheritable(True)
        return listener

    def serve(self, started: Callable[[], object] | None = None) -> int:
        """Start everything, call `started`, then block until SIGTERM or SIGINT; returns
        the exit code."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self._stop.set())
        self.prove_publish_targets()
        self.start()
        if started is not None:
            started()
        self._stop.wait()
        return self.stop()

    def slack_events(self) -> SlackEvents:
        """HTTP mode's `/slack/events`: each signed request acted on once across replicas."""
        deliveries = DeliveryBook(self.core.store, self.core.clock)
        return SlackEvents(self.bolt, _secret(self.settings.slack_signing_secret), deliveries.first)

    def start(self) -> None:
        socket_mode = bool(self.settings.slack_app_token)
        listener = self.bind_http()
        server_config = uvicorn.Config(
            web_app(None if socket_mode else self.slack_events(), self.ready),
            log_level="warning",
        )
        self._server = uvicorn.Server(server_config)
        self._http_thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [listener]}, name="http", daemon=True
        )
        if socket_mode:  # before any work starts: a refused app token exits cleanly
            self._socket = SocketLink(
                self.bolt,
                _secret(self.settings.slack_app_token),
                store=self.core.store,
                clock=self.core.clock,
            )
            self._socket.connect()  # an app token Slack refuses is one line (ConfigError)
        self._http_thread.start()
        self.prepare_drafting()
        self.host.start()
        self.host.drafting.take(self.work.describe_unasked_source_images)
        log.info("galley running: %d recipes", len(self.core.config.recipes))

    def prove_publish_targets(self) -> list[CredentialProof]:
        """Each publish target's credentials proved once, before the bot says it runs, as
        `galley check --online` proves them (posting nothing): one line per target, a
        warning naming the target and its secret for each failure. The bot starts all the
        same: drafting and review go on while someone fixes the secret, and a publication
        to that target fails and is alerted as any refusal is (docs/design.md §24)."""
        proofs = prove_targets(self.core.config, self.services.publishers.publishers_for)
        for proof in proofs:
            if proof.ok:
                log.info("publish target %s", proof)
            else:
                log.warning("publish target %s (galley still starts)", proof)
        return proofs

    def prepare_drafting(self) -> None:
        """Load the model client before the scheduler can fire: start-up's catch-up and
        the first slot draft at once, and their claims are not held through seconds of
        imports (long enough, on a busy host, for the next slot to be skipped as overlap)."""
        seconds = self.core.prepare_drafting()
        if seconds is not None:
            log.info(
                "drafter ready in %.2fs", seconds, extra={"galley": {"event": "drafter_ready"}}
            )

    @property
    def http_port(self) -> int:
        """The bound port (useful with GALLEY_HTTP_PORT=0), once the server is up."""
        deadline = time.monotonic() + 10
        while self._server is None or not self._server.started:
            if time.monotonic() > deadline:
                raise TimeoutError("the HTTP server did not start")
            time.sleep(0.01)
        return int(self._server.servers[0].sockets[0].getsockname()[1])

    def stop(self) -> int:
        """No new runs; running model calls get `shutdown_grace`; then everything stops."""
        self._stop.set()
        log.info("stopping: no new runs; waiting up to %s for running calls", self.shutdown_grace)
        finished = self.host.stop(self.shutdown_grace)
        if self._socket is not None:
            self._socket.close()
        if self._server is not None:
            self._server.should_exit = True
        if self._http_thread is not None:
            self._http_thread.join(timeout=5)
        if not finished:
            log.warning("left unfinished work for the next start (claims expire, then resume)")
        return 0
