"""The publishing world for tests: one config, one database, a fake webhook and a fake
Slack, and services built the way each worker (or a restarted process) builds its own.
Used by the publishing tests and the concurrency tests alike.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa
from slack_sdk import WebClient
from sqlmodel import col, select

from bot.slack_surface import ChannelPacer, SlackChannels
from bot.wiring import Publishers, PublishingServices, publishing_services
from core.api.galley import Galley
from core.api.services import Services
from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting_policies import DraftOutcome
from core.models import DraftRow, EffectRow, EventRow, RunRow
from core.operations.alerts import AlertService
from core.operations.resolution import Resolver
from core.policies import PublishOutcome, ThreadStyle
from core.ports import Fit, PostQuery, Publication, Publisher, ThreadPublisher
from core.publishing.service import PublishingService, PublishResult
from core.review.queue import ReviewAnswer
from core.setup.config import Config, Recipe, parse_config
from core.store.effects import EffectLedger
from core.store.engine import Store, normalise_url
from core.testing import FrozenClock
from tests.conftest import PG_URL, config_text
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.fakes.webhook import Action, FakeWebhook, accept_then_hang
from tests.harness import rows
from tests.harness.approvals import approve

RECIPE = "weekly-update"
SLOT = "2026-11-23T09:00"
RUN = f"{RECIPE}@{SLOT}"
KEY = f"linkedin|{RUN}|v1"
KEY_V2 = f"linkedin|{RUN}|v2"
HOOK_KEY = f"{KEY}|publish:webhook"
REVIEW = "C0REVIEW"
ANNOUNCE = "C0ANNOUNCE"
ALERTS = "C0ALERTS"
SLACK_KEY = f"{KEY}|publish:slack:{ANNOUNCE}"
PEOPLE = (
    f'alert_channel = "{ALERTS}"\n'
    'alert_mentions = ["U0ONCALL", "S0EDITORS"]\n'
    'approvers = ["U0EDITOR", "S0EDITORS"]\n'
    'admins = ["U0ADMIN"]'
)
MENTIONS = ("<@U0ONCALL>", "<!subteam^S0EDITORS>")
SECRET = "8f742231b10e8888abcd99yyyzzz85a5-galley-publishing"
HANG = 5.0  # the fake holds a hung answer this long; the call timeout is 1 s


class Crash(BaseException):
    """Stands in for the process dying at this point: nothing after it runs."""


class WrappedPublisher:
    """A destination's publisher passed through as it is: tests override the one call
    they hold up or interleave with."""

    def __init__(self, inner: Publisher) -> None:
        self.inner = inner

    @property
    def target(self) -> str:
        return self.inner.target

    @property
    def thread_style(self) -> ThreadStyle:
        """The inner publisher's (AttributeError when it takes no thread, as it would)."""
        return cast(ThreadPublisher, self.inner).thread_style

    def publish(self, publication: Publication) -> str:
        return self.inner.publish(publication)

    def lookup(self, query: PostQuery) -> str | None:
        return self.inner.lookup(query)

    def link(self, external_id: str) -> str | None:
        return self.inner.link(external_id)

    def fit(self, text: str) -> Fit | None:
        return self.inner.fit(text)


class HeldPublisher(WrappedPublisher):
    """Sends only once `release` is set: keeps one worker inside the call while another
    worker tries the same run."""

    def __init__(self, inner: Publisher, release: threading.Event) -> None:
        super().__init__(inner)
        self.release = release

    def publish(self, publication: Publication) -> str:
        self.release.wait(10)
        return self.inner.publish(publication)


# --- config --------------------------------------------------------------------------------


def webhook_table(hook: FakeWebhook, *, status_url: bool = True) -> str:
    lookup = f', status_url = "{hook.status_url}"' if status_url else ""
    return f'publish = {{ to = "webhook", url = "{hook.hook_url}"{lookup} }}'


def slack_table(channel: str = ANNOUNCE) -> str:
    return f'publish = {{ to = "slack", channel = "{channel}" }}'


def galley_config(publish: str, *, defaults: str = "", slack: str = "") -> str:
    """The shared test config, with a publish table on the recipe, people to alert and
    a 1 s call timeout. TOML inline tables are one line: the table goes after `prompt`."""
    text = config_text()
    text = re.sub(r"^(prompt = .*)$", lambda m: f"{m.group(1)}\n{publish}", text, flags=re.M)
    text = text.replace(
        f'review_channel = "{REVIEW}"', f'review_channel = "{REVIEW}"\n{PEOPLE}\n{slack}'
    )
    return text.replace("[defaults]\n", f'[defaults]\ncall_timeout = "1s"\n{defaults}\n')


def slack_channels(slack: FakeSlack) -> SlackChannels:
    client = WebClient(
        token="xoxb-test", base_url=slack.url + "/api/", timeout=1, retry_handlers=[]
    )
    return SlackChannels(client, ChannelPacer(0))


# --- in-process world ----------------------------------------------------------------------


@dataclass
class World:
    """One config, one database and the fake destinations; services built on demand,
    as each worker (or a restarted process) would build its own."""

    db_url: str
    config: Config
    clock: FrozenClock
    hook: FakeWebhook
    slack: FakeSlack
    drafter: AnthropicDrafter
    environ: dict[str, str] | None = None  # the publishers' secrets (default: the process's)
    store: Store = field(init=False)
    core: Services = field(init=False)  # core's container, as the bot builds it
    galley: Galley = field(init=False)  # the operator facade over it
    publishers: Publishers = field(init=False)  # the bot's publisher_for
    _backup: Path | str | None = None

    def __post_init__(self) -> None:
        self.publishers = Publishers(self.channels, self.environ)
        self._open()

    def _open(self) -> None:
        self.store = Store(self.db_url)
        self.core = Services(self.config, self.store, drafter=self.drafter, clock=self.clock)
        self.galley = Galley.over(self.core)

    @property
    def recipe(self) -> Recipe:
        return self.config.recipes[RECIPE]

    @property
    def channels(self) -> SlackChannels:
        return slack_channels(self.slack)

    # --- services ---

    def publisher(self, recipe: Recipe) -> Publisher:
        return self.publishers(recipe)

    def ledger(self, worker: str = "w1", store: Store | None = None) -> EffectLedger:
        return EffectLedger(store or self.store, self.clock, worker)

    def services(
        self,
        worker: str = "w1",
        *,
        publisher: Publisher | None = None,
        ledger: EffectLedger | None = None,
        store: Store | None = None,
    ) -> PublishingServices:
        """One worker's alerts and publishing, wired as `galley run` wires them."""
        store = store or self.store
        return publishing_services(
            store,
            self.config,
            self.clock,
            ledger or self.ledger(worker, store),
            self.channels,
            (lambda _recipe: publisher) if publisher else self.publishers.publishers_for,
        )

    def alerts(self, worker: str = "w1", store: Store | None = None) -> AlertService:
        return self.services(worker, store=store).alerts

    def service(self, worker: str = "w1", **wiring: Any) -> PublishingService:
        """One worker's publishing (`wiring`: publisher, ledger, store, as `services`)."""
        return self.services(worker, **wiring).publishing

    def resolver(self, worker: str = "w1") -> Resolver:
        return Resolver(self.store, self.config, self.clock)

    # --- acting ---

    def draft(self) -> str:
        result = self.galley.draft(RECIPE, SLOT)
        assert result.outcome == DraftOutcome.DRAFTED, result
        assert result.key is not None
        return result.key

    def approve(self, key: str = KEY, revision: int = 1, user: str = "U0EDITOR") -> ReviewAnswer:
        return approve(self.store, self.config, self.clock, key, user=user, revision=revision)

    def approved(self) -> str:
        key = self.draft()
        assert self.approve(key).accepted
        return key

    def go_uncertain(self, action: Action | None = None) -> PublishResult:
        """Approve, then publish into a webhook that takes the POST and never answers."""
        self.approved()
        self.hook.script_post(action or accept_then_hang(HANG))
        result = self.service().publish_run(RUN)
        assert result.outcome == PublishOutcome.UNCERTAIN, result
        return result

    # --- looking ---

    def run_row(self, run: str = RUN) -> RunRow:
        return rows.run_row(self.store, run)

    def draft_row(self, key: str = KEY) -> DraftRow:
        return rows.draft_row(self.store, key)

    def effect(self, key: str = HOOK_KEY) -> EffectRow | None:
        with self.store.transaction() as session:
            return session.exec(select(EffectRow).where(col(EffectRow.key) == key)).one_or_none()

    def publish_effects(self) -> list[EffectRow]:
        with self.store.transaction() as session:
            return list(
                session.exec(select(EffectRow).where(col(EffectRow.step) == "publish")).all()
            )

    def events(self) -> int:
        with self.store.transaction() as session:
            return len(session.exec(select(EventRow)).all())

    def posts(self) -> int:
        """POSTs the webhook received, whatever became of them."""
        return len(self.hook.posts)

    def alert_messages(self) -> list[dict[str, Any]]:
        return self.slack.messages(ALERTS)

    def announced(self) -> list[dict[str, Any]]:
        return self.slack.messages(ANNOUNCE)

    # --- backups ---

    def back_up(self) -> None:
        """Take a copy of the whole database, as a nightly backup would."""
        self.store.dispose()
        if self.store.dialect == "sqlite":
            path = Path(str(sa.make_url(self.db_url).database))
            with sqlite3.connect(path) as conn:  # fold the WAL into the main file first
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
            self._backup = path.with_suffix(".backup")
            shutil.copy(path, self._backup)
        else:
            name = str(sa.make_url(self.db_url).database)
            self._backup = f"{name}_backup"
            with pg_admin() as admin:
                admin.execute(sa.text(f'CREATE DATABASE "{self._backup}" TEMPLATE "{name}"'))
        self._open()

    def restore(self) -> None:
        """Put the backup back in place of the live database."""
        assert self._backup is not None
        self.store.dispose()
        if isinstance(self._backup, Path):
            path = Path(str(sa.make_url(self.db_url).database))
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            shutil.copy(self._backup, path)
        else:
            name = str(sa.make_url(self.db_url).database)
            with pg_admin() as admin:
                admin.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
                admin.execute(sa.text(f'CREATE DATABASE "{name}" TEMPLATE "{self._backup}"'))
                admin.execute(sa.text(f'DROP DATABASE "{self._backup}"'))
            self._backup = None
        self._open()

    def close(self) -> None:
        self.publishers.close()
        self.store.dispose()
        if isinstance(self._backup, str):
            with pg_admin() as admin:
                admin.execute(sa.text(f'DROP DATABASE IF EXISTS "{self._backup}" WITH (FORCE)'))


@contextmanager
def pg_admin() -> Iterator[sa.Connection]:
    """A connection to the PostgreSQL server outside any transaction (for CREATE DATABASE)."""
    assert PG_URL is not None
    engine = sa.create_engine(normalise_url(PG_URL), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


MakeWorld = Callable[..., World]


@contextmanager
def world_factory(fake_anthropic: FakeAnthropic) -> Iterator[MakeWorld]:
    """`make(db_url, target="webhook" | "webhook-no-status" | "slack", defaults=…,
    slack=…)`: a World with its own fake webhook and fake Slack (the `worlds` fixture);
    `publish=` a publish line of its own (other fakes), `environ=` its publishers' secrets."""
    made: list[World] = []
    servers: list[FakeWebhook | FakeSlack] = []

    def make(
        db_url: str,
        *,
        target: str = "webhook",
        defaults: str = "",
        slack: str = "",
        publish: str | None = None,
        environ: dict[str, str] | None = None,
    ) -> World:
        hook, fake_slack = FakeWebhook().start(), FakeSlack().start()
        servers.extend([hook, fake_slack])
        publish = (
            publish
            or {
                "webhook": webhook_table(hook),
                "webhook-no-status": webhook_table(hook, status_url=False),
                "slack": slack_table(),
            }[target]
        )
        config = parse_config(galley_config(publish, defaults=defaults, slack=slack))
        world = World(
            db_url,
            config,
            FrozenClock(),
            hook,
            fake_slack,
            AnthropicDrafter("k", fake_anthropic.url),
            environ,
        )
        made.append(world)
        return world

    yield make
    for world in made:
        world.close()
    for server in servers:
        server.stop()
