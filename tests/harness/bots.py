"""A real `Bot` for tests and benchmarks, pointed at the local fakes.

HTTP on 127.0.0.1 (a free port), or none: Slack's requests then go straight to Bolt's
dispatch in this process (`serve_http=False`). Outbox and housekeeping passes left to the caller
(`bot.sync_slack()`, `bot.reconcile()`), and start-up catch-up settled before it returns.
The bot's clock runs at real speed from a fixed instant (`BOT_EPOCH`), so the slots it
finds due never depend on the day the tests run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.run import Bot
from core.api.galley import Galley
from core.setup.settings import Settings
from core.store.engine import Store
from core.testing import RunningClock
from tests.fakes.slack_api import FakeSlack
from tests.harness.slack_requests import DispatchSender, SlackSender

NEVER = timedelta(hours=1)  # periodic passes the test drives itself
# A Wednesday: the latest due slot of a Monday 09:00 recipe is 2026-11-23T09:00 London,
# two days old, far past any misfire_grace.
BOT_EPOCH = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def start_bot(
    *,
    config: Path,
    db_url: str,
    anthropic_url: str,
    slack_url: str,
    secret: str,
    app_token: str | None = None,
    serve_http: bool = True,
) -> Bot:
    """With `app_token`, the bot runs in Socket Mode (it asks `slack_url` for the socket's
    URL: attach a tests.fakes.socket_mode.FakeSocketMode to that fake first). Without
    `serve_http` nothing listens: drafting and the scheduler start as `Bot.start` starts
    them, and a test hands requests to `bot.bolt.dispatch` (`DispatchSender`)."""
    settings = Settings(
        slack_bot_token="xoxb-test",
        slack_app_token=app_token,
        slack_signing_secret=secret,
        anthropic_api_key="test-key",
        anthropic_base_url=anthropic_url,
        galley_config=config,
        galley_database_url=db_url,
        galley_slack_api_url=slack_url + "/api/",
        galley_http_port=0,
    )
    bot = Bot(
        settings,
        outbox_every=NEVER,
        housekeeping_every=NEVER,
        shutdown_grace=timedelta(seconds=5),
        clock=RunningClock(BOT_EPOCH),
        sweep_every=NEVER,
        outbox_at_start=False,
    )
    if serve_http:
        bot.start()
    else:
        bot.prepare_drafting()
        bot.host.start()
    bot.host.wait_idle()  # start-up catch-up has decided the latest due slot
    return bot


def operator(bot: Bot) -> Galley:
    """The operator facade (what the CLI and a notebook call) over a running bot's own
    services: the bot itself never calls it."""
    return Galley.over(bot.core)


@dataclass
class RunningBot:
    """A started HTTP-mode `Bot`, the fake Slack it talks to, a store of the test's own for
    reading rows, and a sender of signed requests: to its `/slack/events` over HTTP, or to
    its Bolt app in this process."""

    bot: Bot
    slack: FakeSlack
    store: Store
    sender: SlackSender

    def stop(self) -> None:
        self.bot.stop()
        self.sender.close()
        self.slack.stop()
        self.bot.core.store.dispose()
        self.store.dispose()


StartRunningBot = Callable[..., RunningBot]


@contextmanager
def running_bots(tmp_path: Path, anthropic_url: str, secret: str) -> Iterator[StartRunningBot]:
    """`start(config_text, db_url, over_http=False)`: the config in a file of its own, a
    fresh fake Slack and a Bot on both (see `start_bot`); Slack's requests reach it through
    Bolt's dispatch, or over real HTTP with `over_http` (for tests of the transport
    itself). Every bot started is stopped on exit."""
    started: list[RunningBot] = []

    def start(config_text: str, db_url: str, *, over_http: bool = False) -> RunningBot:
        path = tmp_path / f"galley-{len(started)}.toml"
        path.write_text(config_text)
        slack = FakeSlack().start()
        try:
            bot = start_bot(
                config=path,
                db_url=db_url,
                anthropic_url=anthropic_url,
                slack_url=slack.url,
                secret=secret,
                serve_http=over_http,
            )
        except BaseException:
            slack.stop()
            raise
        sender = (
            SlackSender(f"http://127.0.0.1:{bot.http_port}/slack/events", secret)
            if over_http
            else DispatchSender(bot.bolt, secret)
        )
        running = RunningBot(bot, slack, Store(db_url), sender)
        started.append(running)
        return running

    try:
        yield start
    finally:
        for running in started:
            running.stop()
