"""Warnings before a slot fails (docs/design.md §36), on SQLite and PostgreSQL: a target
whose token the fake Mastodon refuses (401) is proved an hour before its slot, alerted
once in the alert channel naming the target and the variable to set, not proved or
alerted again within the hour nor by a second replica, and the alert is settled in place
by the first check after the token works again. Final state only: the requests the
fakes received and the receipts in the effect ledger."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlmodel import select

from bot.slack_publishing import SlackAlerter
from core.identity import (
    alert_settled_key,
    credential_alert_key,
    credential_check_key,
    expiry_alert_key,
)
from core.models import EffectRow, RecipeRow, RunRow
from core.operations.credential_watch import CredentialWatch
from core.policies import EffectStep
from core.ports import Publisher
from core.publishing.destinations import Destinations
from core.publishing.platforms.mastodon import MastodonPublisher
from core.setup.config import Config, Recipe, parse_config
from core.setup.publish_targets import MastodonTarget
from core.states import EffectState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.testing import FrozenClock
from tests.conftest import config_text
from tests.fakes.mastodon import TOKEN, USERNAME, FakeMastodon
from tests.fakes.slack_api import FakeSlack
from tests.harness.slow_marks import starts_a_server
from tests.harness.worlds import slack_channels

SLOT = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # a Monday: "0 9 * * mon" in London, GMT
VERIFY = "/api/v1/accounts/verify_credentials"


@pytest.fixture
@starts_a_server
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack().start()
    yield fake
    fake.stop()


@pytest.fixture
@starts_a_server
def mastodon() -> Iterator[FakeMastodon]:
    with FakeMastodon() as fake:
        yield fake


def mastodon_config(url: str) -> Config:
    publish = f'publish = {{ to = "mastodon", instance = "{url}" }}'
    text = re.sub(r"^(prompt = .*)$", rf"\1\n{publish}", config_text(), flags=re.M)
    return parse_config(text)


@dataclass
class Replica:
    watch: CredentialWatch
    clock: FrozenClock


def replica(store: Store, slack: FakeSlack, config: Config, worker: str) -> Replica:
    clock = FrozenClock(SLOT)
    [spec] = config.recipe("weekly-update").targets
    assert isinstance(spec, MastodonTarget)
    publisher = MastodonPublisher(spec, timedelta(seconds=5), {spec.secret_env: TOKEN})

    def publishers_for(recipe: Recipe) -> list[Publisher]:
        return [publisher]

    alerter = SlackAlerter(slack_channels(slack), config.slack.alert_channel_or_review)
    ledger = EffectLedger(store, clock, worker)
    return Replica(CredentialWatch(store, config, clock, ledger, alerter, publishers_for), clock)


def sweep_at(replica: Replica, at: datetime) -> int:
    replica.clock.set(at)
    return replica.watch.sweep()


def test_a_revoked_token_alerts_once_before_the_slot_and_settles_once_it_works(
    store: Store, slack: FakeSlack, mastodon: FakeMastodon
) -> None:
    config = mastodon_config(mastodon.url)
    first, second = (replica(store, slack, config, w) for w in ("w1", "w2"))
    channel = config.slack.alert_channel_or_review
    target = f"mastodon:{mastodon.url.removeprefix('http://')}"
    del mastodon.accounts[TOKEN]  # revoked: the instance answers 401

    assert sweep_at(first, SLOT - timedelta(hours=2)) == 0  # no slot within the hour
    assert mastodon.requests_to(VERIFY) == []

    assert sweep_at(first, SLOT - timedelta(minutes=50)) == 1
    assert sweep_at(first, SLOT - timedelta(minutes=20)) == 0  # within the hour
    assert sweep_at(second, SLOT - timedelta(minutes=10)) == 0  # another replica
    assert len(mastodon.requests_to(VERIFY)) == 1
    [alert] = slack.messages(channel)
    said = str(alert.get("blocks"))
    assert target in said and "GALLEY_MASTODON_TOKEN" in said and "401" in said

    mastodon.accounts[TOKEN] = USERNAME  # fixed
    assert sweep_at(second, SLOT + timedelta(minutes=5)) == 1  # the next hour: settled
    assert sweep_at(first, SLOT + timedelta(minutes=40)) == 0
    assert sweep_at(first, SLOT + timedelta(hours=2)) == 0  # settled, no slot: not proved
    assert len(mastodon.requests_to(VERIFY)) == 2
    [settled] = slack.messages(channel)
    assert settled["ts"] == alert["ts"] and "Settled" in str(settled.get("blocks"))
    assert len(slack.calls("chat.postMessage")) == 1
    assert len(slack.calls("chat.update")) == 1

    told = credential_alert_key(target, SLOT - timedelta(hours=1))
    with store.read() as session:
        receipts = session.exec(select(EffectRow.key, EffectRow.state)).all()
    assert (told, EffectState.SUCCEEDED) in receipts
    assert (alert_settled_key(told), EffectState.SUCCEEDED) in receipts
    checks = [k for k, _ in receipts if k.startswith(EffectStep.CREDENTIAL_CHECK.value)]
    assert len(checks) == 2  # one per hour proved


def test_a_token_that_stays_refused_is_told_once_per_episode(
    store: Store, slack: FakeSlack, mastodon: FakeMastodon
) -> None:
    config = mastodon_config(mastodon.url)
    only = replica(store, slack, config, "w1")
    del mastodon.accounts[TOKEN]

    sweep_at(only, SLOT - timedelta(minutes=30))
    for hours in (1, 2, 3):  # an open alert: proved every hour, slot or not
        assert sweep_at(only, SLOT + timedelta(hours=hours)) == 0

    assert len(mastodon.requests_to(VERIFY)) == 4
    assert len(slack.messages(config.slack.alert_channel_or_review)) == 1


def test_a_known_token_expiry_alerts_once_seven_days_ahead(store: Store, slack: FakeSlack) -> None:
    author = "urn:li:organization:1"
    publish = f'publish = {{ to = "linkedin", author = "{author}" }}'
    text = re.sub(r"^(prompt = .*)$", rf"\1\n{publish}", config_text(), flags=re.M)
    config = parse_config(text)
    env = {"GALLEY_LINKEDIN_TOKEN_EXPIRES": "2026-12-01"}
    alerter = SlackAlerter(slack_channels(slack), config.slack.alert_channel_or_review)
    clock = FrozenClock(datetime(2026, 11, 23, 12, 0, tzinfo=UTC))
    watches = [
        CredentialWatch(
            store, config, clock, EffectLedger(store, clock, w), alerter, lambda r: [], env
        )
        for w in ("w1", "w2")
    ]

    assert watches[0].sweep() == 0  # eight days ahead
    clock.set(datetime(2026, 11, 24, 0, 5, tzinfo=UTC))
    assert watches[0].sweep() == 1  # seven
    assert watches[1].sweep() == 0  # another replica
    clock.set(datetime(2026, 11, 28, 9, 0, tzinfo=UTC))
    assert watches[0].sweep() == 0  # once

    [alert] = slack.messages(config.slack.alert_channel_or_review)
    said = str(alert.get("blocks"))
    assert f"linkedin:{author}: token expires 2026-12-01 (in 7 day(s))" in said
    assert "GALLEY_LINKEDIN_TOKEN_EXPIRES" in said
    assert expiry_alert_key(f"linkedin:{author}", date(2026, 12, 1)) in _keys(store)


def _keys(store: Store) -> list[str]:
    with store.read() as session:
        return list(session.exec(select(EffectRow.key)).all())


def test_only_targets_with_credentials_are_proved_through_the_bots_destinations(
    store: Store, slack: FakeSlack, mastodon: FakeMastodon
) -> None:
    webhook = 'publish = [{ to = "webhook", url = "https://hooks.example.test/galley" }, '
    mastodon_target = f'{{ to = "mastodon", instance = "{mastodon.url}" }}]'
    text = re.sub(r"^(prompt = .*)$", rf"\1\n{webhook}{mastodon_target}", config_text(), flags=re.M)
    config = parse_config(text)
    destinations = Destinations(environ={"GALLEY_MASTODON_TOKEN": "revoked"})
    clock = FrozenClock(SLOT - timedelta(minutes=45))
    alerter = SlackAlerter(slack_channels(slack), config.slack.alert_channel_or_review)
    ledger = EffectLedger(store, clock, "w1")
    watch = CredentialWatch(store, config, clock, ledger, alerter, destinations.publishers_for)

    assert watch.sweep() == 1
    target = f"mastodon:{mastodon.url.removeprefix('http://')}"
    checks = [k for k in _keys(store) if k.startswith(EffectStep.CREDENTIAL_CHECK.value)]
    assert checks == [credential_check_key(target, SLOT - timedelta(hours=1))]
    assert len(mastodon.requests_to(VERIFY)) == 1


def test_a_planned_post_has_its_targets_proved_before_its_publish_time(
    store: Store, slack: FakeSlack, mastodon: FakeMastodon
) -> None:
    """A run at review or approved with a `publish_at` (a person's post, a draft ahead)
    is proved before that time as a slot is, though no slot of the schedule is near."""
    config = mastodon_config(mastodon.url)
    only = replica(store, slack, config, "w1")
    planned = datetime(2026, 11, 25, 15, 0, tzinfo=UTC)  # a Wednesday: no slot that day
    with store.transaction() as session:
        session.add(RecipeRow(name="weekly-update", version=1, paused=False, updated_at=SLOT))
        session.flush()
        session.add(
            RunRow(
                id="weekly-update@2026-11-25T15:00",
                recipe="weekly-update",
                slot_wall="2026-11-25T15:00",
                slot_at=planned,
                state=RunState.APPROVED,
                publish_at=planned,
                created_at=SLOT,
                updated_at=SLOT,
            )
        )
    del mastodon.accounts[TOKEN]

    assert sweep_at(only, planned - timedelta(hours=2)) == 0
    assert mastodon.requests_to(VERIFY) == []
    assert sweep_at(only, planned - timedelta(minutes=40)) == 1
    [alert] = slack.messages(config.slack.alert_channel_or_review)
    assert "2026-11-25 15:00 UTC" in str(alert.get("blocks"))
