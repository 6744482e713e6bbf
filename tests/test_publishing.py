"""Publishing an approved draft exactly once (DESIGN.md §3, §4 rules 3-6 and 8), in
process, over real HTTP to the fake webhook and the fake Slack Web API.

Each interruption ends with exactly one publication, or with an `uncertain` run and one
alert: never two publications. Tests count what the destinations received (POSTs,
distinct publications, channel messages) and read receipts and states from the
database; never log lines. Both backends where it is cheap.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

from bot.alert_blocks import PUBLISH_EVENT_TYPE
from bot.blocks import (
    ACTION_ALERT_PUBLISHED,
    ACTION_APPROVE,
    button_value,
    parse_button_value,
)
from bot.run import Bot
from bot.slack_surface import SlackReviewSurface
from core.effects import EffectLedger, EffectSpec, EffectStart, Proof
from core.errors import KeyPayloadConflict
from core.identity import text_hash
from core.models import DraftRow, EffectRow, RunRow
from core.outbox import ReviewOutbox
from core.policies import EffectDecision, Finding, PublishOutcome
from core.ports import Publication, Publisher
from core.publishing import PublishingService
from core.resolution import Resolver
from core.review import Verdict, decide, edit
from core.states import DraftState, EffectState, RunState
from core.store import Store
from tests import bots
from tests.fakes import slack_api
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.fakes.webhook import (
    Action,
    FakeWebhook,
    accept_then_drop,
    accept_then_hang,
    drop,
    status,
)
from tests.slack_requests import SlackSender, block_actions
from tests.worlds import (
    ALERTS,
    ANNOUNCE,
    HANG,
    HOOK_KEY,
    KEY,
    KEY_V2,
    MENTIONS,
    RECIPE,
    REVIEW,
    RUN,
    SECRET,
    SLACK_KEY,
    SLOT,
    Crash,
    MakeWorld,
    galley_config,
    webhook_table,
)


class CrashBeforeSend:
    """A publisher whose process dies after the receipt and the lookup, before it sends."""

    def __init__(self, inner: Publisher) -> None:
        self.inner = inner

    @property
    def target(self) -> str:
        return self.inner.target

    def publish(self, publication: Publication) -> str:
        raise Crash("killed before the call")

    def lookup(self, effect_key: str) -> str | None:
        return self.inner.lookup(effect_key)


class HeldPublisher:
    """Sends only once `release` is set: keeps one worker inside the call while another
    worker tries the same run."""

    def __init__(self, inner: Publisher, release: threading.Event) -> None:
        self.inner, self.release = inner, release

    @property
    def target(self) -> str:
        return self.inner.target

    def publish(self, publication: Publication) -> str:
        self.release.wait(10)
        return self.inner.publish(publication)

    def lookup(self, effect_key: str) -> str | None:
        return self.inner.lookup(effect_key)


class CrashAfterReceipt(EffectLedger):
    """A ledger whose process dies right after the receipt's `succeeded` commit."""

    def succeed(self, start: EffectStart, proof: Proof) -> Any:
        super().succeed(start, proof)
        raise Crash("killed after the receipt commit")


def publish_payload(text: str, target: str = "webhook", key: str = KEY) -> dict[str, str]:
    """What a publish receipt's payload hash is taken over (core/publishing.py)."""
    return {"target": target, "draft_key": key, "text": text_hash(text)}


def effect_fields(effect: EffectRow | None) -> dict[str, Any]:
    assert effect is not None
    return effect.model_dump()


# --- 1a. interrupted just before the call ---------------------------------------------------


def test_a_crash_just_before_the_call_is_looked_up_then_published_once(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    w.approved()

    crashed = w.service("w1", publisher=CrashBeforeSend(w.publisher(w.recipe)))
    with pytest.raises(Crash):
        crashed.publish_run(RUN)
    effect = w.effect()
    assert effect is not None and effect.state == EffectState.IN_FLIGHT
    assert w.run_row().state == RunState.PUBLISHING
    assert w.posts() == 0

    # Restarted while the dead worker's lease still runs: nobody acts twice.
    early = w.service("w2").publish_run(RUN)
    assert early.outcome == PublishOutcome.IN_PROGRESS
    assert w.posts() == 0

    w.clock.advance(w.recipe.call_timeout * 4 + timedelta(seconds=1))
    lookups_before = len(w.hook.lookups)
    result = w.service("w2").publish_run(RUN)

    assert result.outcome == PublishOutcome.PUBLISHED
    assert result.external_id == "pub_1"
    assert len(w.hook.lookups) > lookups_before  # it looked before it leapt
    assert w.posts() == 1
    assert list(w.hook.publications) == [HOOK_KEY]
    effect = w.effect()
    assert effect is not None
    assert (effect.state, effect.external_id) == (EffectState.SUCCEEDED, "pub_1")
    assert w.run_row().state == RunState.SUCCEEDED
    assert w.draft_row().state == DraftState.PUBLISHED


def test_a_bare_in_flight_receipt_whose_lease_ran_out_is_looked_up_then_published_once(
    worlds: MakeWorld, db_url: str
) -> None:
    """The receipt was written and the process died: the run is still `approved`."""
    w = worlds(db_url)
    w.approved()
    text = w.draft_row().text
    assert text is not None
    start = w.ledger("w1").begin(
        EffectSpec(
            HOOK_KEY,
            draft_key=KEY,
            step="publish",
            payload=publish_payload(text),
            lease=w.recipe.call_timeout * 4,
            run_id=RUN,
        )
    )
    assert start.decision == EffectDecision.ACT
    w.clock.advance(w.recipe.call_timeout * 4 + timedelta(seconds=1))

    result = w.service("w2").publish_run(RUN)

    assert result.outcome == PublishOutcome.PUBLISHED
    assert w.posts() == 1
    assert list(w.hook.publications) == [HOOK_KEY]
    assert w.run_row().state == RunState.SUCCEEDED
    [effect] = w.publish_effects()
    assert (effect.state, effect.external_id) == (EffectState.SUCCEEDED, "pub_1")


# --- 1b. interrupted during the call --------------------------------------------------------


def test_accepted_then_hung_without_status_url_is_uncertain_alerted_once_and_marked_published(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, target="webhook-no-status")
    result = w.go_uncertain()

    assert w.posts() == 1
    assert list(w.hook.publications) == [HOOK_KEY]
    assert w.run_row().state == RunState.UNCERTAIN
    effect = w.effect()
    assert effect is not None and effect.state == EffectState.UNCERTAIN
    assert result.detail and "no complete answer" in result.detail

    [alert] = w.alert_messages()
    shown = alert["text"] + " " + str(alert["blocks"])
    assert RUN in shown
    for mention in MENTIONS:
        assert mention in shown
    [actions] = [b for b in alert["blocks"] if b["type"] == "actions"]
    labels = [e["text"]["text"] for e in actions["elements"]]
    assert labels == ["Mark published", "Retry", "Cancel"]

    # Further passes cannot look (no status_url) and never send again, nor ping again.
    again = w.service("w2").publish_pending()
    assert [r.outcome for r in again] == [PublishOutcome.UNCERTAIN]
    assert w.alerts().sweep() == 0
    assert w.alerts("w2").sweep() == 0
    assert w.posts() == 1
    assert len(w.alert_messages()) == 1

    said = w.resolver().resolve(RUN, Finding.PUBLISHED, actor="U0ADMIN")
    assert "marked published" in said

    run = w.run_row()
    assert run.state == RunState.SUCCEEDED
    assert w.draft_row().state == DraftState.PUBLISHED
    effect = w.effect()
    assert effect is not None
    assert (effect.state, effect.external_id) == (EffectState.SUCCEEDED, "manual:U0ADMIN")
    assert w.service().publish_pending() == []
    assert w.alerts().sweep() == 0
    assert w.posts() == 1
    assert len(w.hook.publications) == 1
    assert len(w.alert_messages()) == 1


@pytest.mark.parametrize(
    ("fault", "posts", "tries"),
    [
        pytest.param(accept_then_hang(HANG), 1, 1, id="accept_then_hang"),
        pytest.param(accept_then_drop(), 1, 1, id="accept_then_drop"),
        pytest.param(drop(), 2, 2, id="drop_before_acting"),
    ],
)
def test_an_unknown_outcome_with_status_url_is_settled_by_the_next_pass(
    worlds: MakeWorld, db_url: str, fault: Action, posts: int, tries: int
) -> None:
    w = worlds(db_url)
    w.go_uncertain(fault)
    assert w.run_row().state == RunState.UNCERTAIN
    assert len(w.alert_messages()) == 1

    results = w.service("w2").publish_pending()

    assert [r.outcome for r in results] == [PublishOutcome.PUBLISHED]
    assert w.posts() == posts  # a POST dropped before acting is sent once more
    assert list(w.hook.publications) == [HOOK_KEY]
    [effect] = w.publish_effects()
    assert (effect.state, effect.external_id, effect.tries) == (
        EffectState.SUCCEEDED,
        "pub_1",
        tries,
    )
    assert w.run_row().state == RunState.SUCCEEDED
    assert w.draft_row().state == DraftState.PUBLISHED
    assert w.service().publish_pending() == []
    assert w.alerts().sweep() == 0
    assert w.posts() == posts


def test_a_slack_publication_whose_answer_never_came_is_found_by_its_metadata(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, target="slack")
    w.approved()
    w.slack.script("chat.postMessage", slack_api.accept_then_hang(HANG))

    first = w.service().publish_run(RUN)
    second = w.service("w2").publish_pending()

    assert first.outcome == PublishOutcome.UNCERTAIN
    assert [r.outcome for r in second] == [PublishOutcome.PUBLISHED]
    [message] = w.announced()
    assert message["metadata"]["event_type"] == PUBLISH_EVENT_TYPE
    assert message["metadata"]["event_payload"]["effect_key"] == SLACK_KEY
    assert (
        len([c for c in w.slack.calls("chat.postMessage") if c.params["channel"] == ANNOUNCE]) == 1
    )
    effect = w.effect(SLACK_KEY)
    assert effect is not None and effect.external_id == message["ts"]
    assert w.run_row().state == RunState.SUCCEEDED


# --- 1d. the same trigger delivered twice ---------------------------------------------------


def test_the_same_trigger_twice_at_once_publishes_once(worlds: MakeWorld, db_url: str) -> None:
    w = worlds(db_url)
    w.approved()
    release = threading.Event()
    stores = [Store(db_url), Store(db_url)]  # two replicas, two connection pools
    services = [
        w.service(f"replica-{i}", store=s, publisher=HeldPublisher(w.publisher(w.recipe), release))
        for i, s in enumerate(stores)
    ]
    barrier = threading.Barrier(2)

    def trigger(service: PublishingService) -> PublishOutcome:
        barrier.wait()
        try:
            return service.publish_run(RUN).outcome
        finally:
            release.set()  # the first to return lets the one inside the call go on

    try:
        with ThreadPoolExecutor(2) as pool:
            outcomes = sorted(pool.map(trigger, services))
    finally:
        for store in stores:
            store.dispose()

    assert outcomes == sorted([PublishOutcome.PUBLISHED, PublishOutcome.IN_PROGRESS])
    assert w.posts() == 1
    assert list(w.hook.publications) == [HOOK_KEY]
    [effect] = w.publish_effects()
    assert (effect.state, effect.tries) == (EffectState.SUCCEEDED, 1)
    assert w.run_row().state == RunState.SUCCEEDED


def test_the_same_trigger_twice_in_a_row_publishes_once(worlds: MakeWorld, db_url: str) -> None:
    w = worlds(db_url)
    w.approved()

    first = w.service("w1").publish_run(RUN)
    second = w.service("w2").publish_run(RUN)
    passes = w.service("w1").publish_pending() + w.service("w2").publish_pending()

    assert first.outcome == PublishOutcome.PUBLISHED
    assert second.outcome == PublishOutcome.NOT_READY
    assert passes == []
    assert w.posts() == 1
    assert list(w.hook.publications) == [HOOK_KEY]
    assert len(w.publish_effects()) == 1


# --- 1e. a database restored from a copy taken before the send -----------------------------


@pytest.mark.parametrize("target", ["webhook", "slack"])
def test_a_database_restored_from_before_the_send_finds_the_publication(
    worlds: MakeWorld, db_url: str, target: str
) -> None:
    w = worlds(db_url, target=target)
    w.approved()
    w.back_up()  # approved, nothing sent yet

    first = w.service().publish_run(RUN)
    assert first.outcome == PublishOutcome.PUBLISHED

    w.restore()
    assert w.run_row().state == RunState.APPROVED  # the rows forgot the publication
    assert w.publish_effects() == []

    second = w.service("w2").publish_run(RUN)

    assert second.outcome == PublishOutcome.PUBLISHED
    assert second.external_id == first.external_id  # found at the destination
    assert w.run_row().state == RunState.SUCCEEDED
    assert w.draft_row().state == DraftState.PUBLISHED
    [effect] = w.publish_effects()
    assert effect.state == EffectState.SUCCEEDED
    assert effect.external_id == first.external_id
    assert effect.result is not None and '"found": true' in effect.result
    if target == "webhook":
        assert w.posts() == 1
        assert list(w.hook.publications) == [HOOK_KEY]
    else:
        posts = [c for c in w.slack.calls("chat.postMessage") if c.params["channel"] == ANNOUNCE]
        assert len(posts) == 1
        [message] = w.announced()
        assert message["metadata"]["event_payload"]["effect_key"] == SLACK_KEY
        assert message["ts"] == first.external_id


# --- 2. receipts ---------------------------------------------------------------------------


def test_a_crash_after_the_receipt_commit_is_done_on_restart_without_a_call(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    w.approved()
    crashing = CrashAfterReceipt(w.store, w.clock, "w1")
    with pytest.raises(Crash):
        w.service(ledger=crashing).publish_run(RUN)
    assert w.run_row().state == RunState.PUBLISHING
    assert w.posts() == 1
    lookups = len(w.hook.lookups)

    result = w.service("w2").publish_run(RUN)

    assert (result.outcome, result.external_id) == (PublishOutcome.PUBLISHED, "pub_1")
    assert len(w.hook.lookups) == lookups  # the receipt is proof: no need to ask
    assert w.posts() == 1
    assert w.run_row().state == RunState.SUCCEEDED
    assert w.draft_row().state == DraftState.PUBLISHED

    text = w.draft_row().text
    assert text is not None
    again = w.ledger("w3").begin(
        EffectSpec(
            HOOK_KEY,
            draft_key=KEY,
            step="publish",
            payload=publish_payload(text),
            lease=timedelta(seconds=4),
            run_id=RUN,
        )
    )
    assert again.decision == EffectDecision.DONE
    assert again.receipt.external_id == "pub_1"
    assert w.posts() == 1


def test_a_bumped_version_is_a_second_deliberate_publication_under_another_key(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    w.approved()
    assert w.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED

    assert w.galley.bump(RECIPE, actor="U0ADMIN", reason="new brief") == 2
    assert w.draft() == KEY_V2
    assert w.approve(KEY_V2).accepted
    result = w.service().publish_run(RUN)

    assert (result.outcome, result.external_id) == (PublishOutcome.PUBLISHED, "pub_2")
    assert w.posts() == 2
    keys = sorted(w.hook.publications)
    assert keys == [HOOK_KEY, f"{KEY_V2}|publish:webhook"]
    assert keys[0].replace("|v1|", "|v2|") == keys[1]
    assert w.draft_row(KEY).state == DraftState.PUBLISHED
    assert w.draft_row(KEY_V2).state == DraftState.PUBLISHED
    assert w.run_row().state == RunState.SUCCEEDED
    assert w.run_row().draft_key == KEY_V2


def test_the_same_key_with_another_payload_is_a_conflict_and_changes_nothing(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    w.approved()
    assert w.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    before, events = effect_fields(w.effect()), w.events()

    with pytest.raises(KeyPayloadConflict):
        w.ledger("w2").begin(
            EffectSpec(
                HOOK_KEY,
                draft_key=KEY,
                step="publish",
                payload=publish_payload("Some other text."),
                lease=timedelta(seconds=4),
                run_id=RUN,
            )
        )
    assert effect_fields(w.effect()) == before
    assert w.events() == events

    # The text changed behind Galley's back and the run was put back to publishing.
    with w.store.transaction() as session:
        draft = session.exec(select(DraftRow).where(col(DraftRow.key) == KEY)).one()
        draft.text = "Edited after publishing."
        run = session.exec(select(RunRow).where(col(RunRow.id) == RUN)).one()
        run.state = RunState.PUBLISHING
        session.add_all([draft, run])
    lookups = len(w.hook.lookups)
    with pytest.raises(KeyPayloadConflict):
        w.service("w2").publish_run(RUN)

    assert effect_fields(w.effect()) == before
    assert w.posts() == 1
    assert len(w.hook.lookups) == lookups
    assert list(w.hook.publications) == [HOOK_KEY]
    assert w.hook.publications[HOOK_KEY]["body"]["text"] != "Edited after publishing."


# --- refusals: retry the right failures (DESIGN.md §4 rule 4) -------------------------------


@pytest.mark.parametrize("code", [429, 503])
def test_a_publish_refused_for_now_is_tried_again_and_published_once(
    worlds: MakeWorld, db_url: str, code: int
) -> None:
    w = worlds(db_url)
    w.approved()
    w.hook.script_post(status(code, {"Retry-After": "0"}))

    first = w.service().publish_run(RUN)
    assert first.outcome == PublishOutcome.WAITING
    assert w.hook.publications == {}
    assert w.run_row().state == RunState.PUBLISHING
    results = w.service("w2").publish_pending()

    assert [r.outcome for r in results] == [PublishOutcome.PUBLISHED]
    assert w.posts() == 2  # the refused POST, then the one that landed
    assert list(w.hook.publications) == [HOOK_KEY]
    [effect] = w.publish_effects()
    assert (effect.state, effect.tries) == (EffectState.SUCCEEDED, 2)
    assert w.run_row().state == RunState.SUCCEEDED
    assert w.alert_messages() == []


def test_a_publish_refused_as_invalid_fails_the_run_and_is_not_retried(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    w.approved()
    w.hook.script_post(status(422))

    result = w.service().publish_run(RUN)

    assert result.outcome == PublishOutcome.FAILED
    assert result.detail and "422" in result.detail
    run = w.run_row()
    assert (run.state, run.reason) == (RunState.FAILED, "publish_rejected")
    assert w.service().publish_pending() == []
    w.clock.advance(timedelta(hours=1))
    assert w.service().publish_pending() == []
    assert w.posts() == 1
    assert w.hook.publications == {}
    effect = w.effect()
    assert effect is not None and effect.state == EffectState.FAILED


def test_a_publish_refused_with_retry_after_is_not_sent_again_before_it(
    worlds: MakeWorld, sqlite_url: str
) -> None:
    w = worlds(sqlite_url)
    w.approved()
    w.hook.script_post(status(429, {"Retry-After": "60"}))
    assert w.service().publish_run(RUN).outcome == PublishOutcome.WAITING

    w.clock.advance(timedelta(seconds=2))  # the bot's next reconcile pass
    w.service().publish_pending()
    assert w.posts() == 1

    w.clock.advance(timedelta(seconds=60))
    assert [r.outcome for r in w.service().publish_pending()] == [PublishOutcome.PUBLISHED]
    assert w.posts() == 2


def test_a_publish_refused_for_auth_fails_the_run_and_alerts_people(
    worlds: MakeWorld, sqlite_url: str
) -> None:
    w = worlds(sqlite_url)
    w.approved()
    w.hook.script_post(status(403))

    assert w.service().publish_run(RUN).outcome == PublishOutcome.FAILED
    w.alerts().sweep()

    assert w.posts() == 1
    assert w.run_row().state == RunState.FAILED
    [alert] = w.alert_messages()
    assert RUN in alert["text"]


# --- 3. people settle an uncertain run ------------------------------------------------------


@pytest.mark.parametrize("how", ["retry", "absent"])
def test_retry_of_an_uncertain_run_sends_exactly_once_more(
    worlds: MakeWorld, db_url: str, how: str
) -> None:
    w = worlds(db_url, target="webhook-no-status")
    w.go_uncertain()
    assert w.posts() == 1

    if how == "retry":
        said = w.resolver().retry(RUN, actor="U0ADMIN")
    else:
        said = w.resolver().resolve(RUN, Finding.ABSENT, actor="U0ADMIN")
    assert "once more" in said
    assert w.run_row().state == RunState.PUBLISHING

    results = w.service("w2").publish_pending()

    assert [r.outcome for r in results] == [PublishOutcome.PUBLISHED]
    assert w.posts() == 2  # the person accepted the risk of a repeat: one more POST
    assert len(w.hook.publications) == 1  # the destination dedupes by Idempotency-Key
    [effect] = w.publish_effects()
    assert (effect.state, effect.tries, effect.external_id) == (EffectState.SUCCEEDED, 2, "pub_1")
    assert w.run_row().state == RunState.SUCCEEDED
    assert w.service().publish_pending() == []
    assert w.posts() == 2
    assert len(w.alert_messages()) == 1


def test_retry_clicked_twice_at_once_sends_only_once_more(worlds: MakeWorld, db_url: str) -> None:
    w = worlds(db_url, target="webhook-no-status")
    w.go_uncertain()
    barrier = threading.Barrier(2)

    def click(actor: str) -> str:
        barrier.wait()
        return Resolver(w.store, w.config, w.clock).retry(RUN, actor=actor)

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(click, ["U0ADMIN", "U0B"]))
    release = threading.Event()
    held = w.service("w-c", publisher=HeldPublisher(w.publisher(w.recipe), release))
    with ThreadPoolExecutor(1) as pool:
        publishing = pool.submit(held.publish_run, RUN)
        eventually(
            lambda: (e := w.effect()) is not None and e.state == EffectState.IN_FLIGHT,
            "the retry's publish to be in flight",
        )
        late = Resolver(w.store, w.config, w.clock).retry(RUN, actor="U0C")  # a third click
        release.set()
        publishing.result(timeout=15)
    w.service().publish_pending()

    assert sum("once more" in a for a in answers) == 1  # one click re-opened it
    assert "not uncertain" in late
    assert w.posts() == 2  # the first POST, and exactly one more for the retry
    assert w.run_row().state == RunState.SUCCEEDED


def test_an_unresolved_alert_is_reminded_once_per_interval(worlds: MakeWorld, db_url: str) -> None:
    w = worlds(db_url, target="webhook-no-status", slack='alert_reminder = "1h"')
    w.go_uncertain()
    assert len(w.alert_messages()) == 1

    assert w.alerts().sweep() == 0
    w.clock.advance(timedelta(minutes=59))
    assert w.alerts().sweep() == 0
    w.service().publish_pending()  # a reconcile pass in between pings nobody either
    assert len(w.alert_messages()) == 1

    w.clock.advance(timedelta(minutes=2))
    assert w.alerts().sweep() == 1
    assert w.alerts("w2").sweep() == 0
    assert w.alerts().sweep() == 0
    messages = w.alert_messages()
    assert len(messages) == 2
    reminder = str(messages[1]["blocks"])
    assert "Reminder" in reminder and RUN in messages[1]["text"]
    for mention in MENTIONS:
        assert mention in reminder

    w.clock.advance(timedelta(hours=1))
    assert w.alerts().sweep() == 1
    assert w.alerts().sweep() == 0
    assert len(w.alert_messages()) == 3
    assert w.posts() == 1

    w.resolver().resolve(RUN, Finding.PUBLISHED, actor="U0ADMIN")
    w.clock.advance(timedelta(hours=2))
    assert w.alerts().sweep() == 0
    assert len(w.alert_messages()) == 3


# --- 4. stale approvals ---------------------------------------------------------------------


def test_an_approval_older_than_approval_ttl_goes_back_to_review(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, defaults='approval_ttl = "1h"')
    w.approved()
    w.clock.advance(timedelta(hours=1, minutes=1))

    result = w.service().publish_run(RUN)

    assert result.outcome == PublishOutcome.SENT_BACK
    assert w.posts() == 0
    assert w.hook.lookups == []
    assert w.publish_effects() == []
    draft = w.draft_row()
    assert (draft.state, draft.revision, draft.decided_by) == (DraftState.READY, 2, None)
    assert w.run_row().state == RunState.AWAITING_REVIEW

    old_button = w.approve(revision=1)
    assert not old_button.accepted
    assert "edited since" in old_button.message
    assert w.draft_row().state == DraftState.READY
    assert w.service().publish_pending() == []
    assert w.posts() == 0

    # Back in review, someone edits it; only the newest revision can be approved.
    edited = "Edited after it went back to review."
    assert edit(
        w.store,
        w.config,
        w.clock,
        draft_key=KEY,
        revision=2,
        text=edited,
        user="U0EDITOR",
        permitted=True,
    ).accepted
    assert not w.approve(revision=2).accepted
    assert w.approve(revision=3).accepted
    assert w.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert w.posts() == 1
    assert w.hook.publications[HOOK_KEY]["body"]["text"] == edited


def test_a_draft_sent_back_for_a_stale_approval_can_still_be_reviewed(
    worlds: MakeWorld, sqlite_url: str
) -> None:
    w = worlds(sqlite_url, defaults='approval_ttl = "24h"\nreview_window = "48h"')
    w.draft()
    w.clock.advance(timedelta(hours=40))
    assert w.approve().accepted  # within the review window
    w.clock.advance(timedelta(hours=25))  # publishing starts after an outage
    assert w.service().publish_run(RUN).outcome == PublishOutcome.SENT_BACK
    assert w.draft_row().state == DraftState.READY

    answer = w.approve(revision=2)

    assert answer.accepted, answer.message


def test_an_uncertain_run_resolved_absent_after_approval_ttl_goes_back_to_review(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, target="webhook-no-status", defaults='approval_ttl = "24h"')
    w.go_uncertain()
    w.clock.advance(timedelta(hours=25))

    w.resolver().resolve(RUN, Finding.ABSENT, actor="U0ADMIN")
    results = w.service().publish_pending()

    assert w.posts() == 1
    assert [r.outcome for r in results] == [PublishOutcome.SENT_BACK]
    assert w.draft_row().state == DraftState.READY


# --- 5. cancel ------------------------------------------------------------------------------


def test_cancelling_an_uncertain_run_lists_completed_effects_and_sends_nothing_more(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, target="webhook-no-status")
    w.draft()
    outbox = ReviewOutbox(
        w.store,
        w.ledger(),
        SlackReviewSurface(w.channels, REVIEW),
        channel=REVIEW,
        call_lease=timedelta(seconds=4),
    )
    assert outbox.post_ready_drafts() == 1
    [review] = w.slack.messages(REVIEW)
    assert w.approve().accepted
    w.hook.script_post(accept_then_hang(HANG))
    assert w.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN

    said = w.resolver().cancel(RUN, actor="U0ADMIN")

    run = w.run_row()
    assert run.state == RunState.CANCELLED
    assert run.reason is not None
    assert f"{KEY}|review → {review['ts']}" in run.reason
    assert "publish" not in run.reason  # its outcome is unknown: not listed as completed
    assert f"{KEY}|review" in said
    assert w.service().publish_pending() == []
    assert "not uncertain" in w.resolver().retry(RUN, actor="U0ADMIN")
    assert "nothing to settle" in w.resolver().resolve(RUN, Finding.ABSENT, actor="U0ADMIN")
    assert w.service().publish_run(RUN).outcome == PublishOutcome.NOT_READY
    w.clock.advance(timedelta(hours=5))
    assert w.alerts().sweep() == 0
    assert w.posts() == 1
    assert len(w.alert_messages()) == 1


# --- the bot: alert buttons and review messages over signed Slack requests ------------------


@dataclass
class BotHarness:
    bot: Bot
    slack: FakeSlack
    hook: FakeWebhook
    store: Store
    sender: SlackSender

    def run_row(self) -> RunRow:
        with self.store.transaction() as session:
            return session.exec(select(RunRow).where(col(RunRow.id) == RUN)).one()

    def draft_row(self) -> DraftRow:
        with self.store.transaction() as session:
            return session.exec(select(DraftRow).where(col(DraftRow.key) == KEY)).one()

    def approve(self) -> None:
        galley = self.bot.galley
        answer = decide(
            galley.store,
            galley.config,
            galley.clock,
            draft_key=KEY,
            revision=1,
            verdict=Verdict.APPROVED,
            user="U0EDITOR",
            permitted=True,
        )
        assert answer.accepted

    def click_alert(self, action_id: str, user: str) -> None:
        [alert] = self.slack.messages(ALERTS)
        [actions] = [b for b in alert["blocks"] if b["type"] == "actions"]
        [value] = [e["value"] for e in actions["elements"] if e["action_id"] == action_id]
        payload = block_actions(
            user=user,
            action_id=action_id,
            value=value,
            message_ts=alert["ts"],
            response_url=self.slack.response_url(user),
            channel=ALERTS,
            block_id="galley_alert",
            message=alert,
        )
        assert self.sender.interactive(payload).status_code == 200

    def replies(self, user: str) -> list[str]:
        return [
            str(c.params.get("text"))
            for c in self.slack.calls(slack_api.RESPONSE_URL)
            if c.path == f"/response/{user}"
        ]


def eventually(probe: Callable[[], Any], what: str, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
    return value


@pytest.fixture
def bot_harness(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> Iterator[Callable[..., BotHarness]]:
    started: list[BotHarness] = []

    def start(db_url: str, *, status_url: bool, defaults: str = "") -> BotHarness:
        hook, fake_slack = FakeWebhook().start(), FakeSlack().start()
        path = tmp_path / f"galley-{len(started)}.toml"
        path.write_text(
            galley_config(webhook_table(hook, status_url=status_url), defaults=defaults)
        )
        bot = bots.start_bot(
            config=path,
            db_url=db_url,
            anthropic_url=fake_anthropic.url,
            slack_url=fake_slack.url,
            secret=SECRET,
        )
        sender = SlackSender(f"http://127.0.0.1:{bot.http_port}/slack/events", SECRET)
        harness = BotHarness(bot, fake_slack, hook, Store(db_url), sender)
        started.append(harness)
        return harness

    yield start
    for h in started:
        h.bot.stop()
        h.sender.close()
        h.slack.stop()
        h.hook.stop()
        h.bot.galley.store.dispose()
        h.store.dispose()


def test_mark_published_clicked_on_the_alert_closes_the_run_without_a_second_post(
    bot_harness: Callable[..., BotHarness], sqlite_url: str
) -> None:
    h = bot_harness(sqlite_url, status_url=False)
    h.hook.script_post(accept_then_hang(HANG))
    assert h.bot.galley.draft(RECIPE, SLOT).key == KEY
    h.approve()

    assert h.bot.publishing.publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    h.bot.reconcile()  # the periodic pass: no second POST, no second alert
    [alert] = h.slack.messages(ALERTS)
    assert RUN in alert["text"]
    for mention in MENTIONS:
        assert mention in str(alert["blocks"])

    h.click_alert(ACTION_ALERT_PUBLISHED, "U0EDITOR")  # an approver, not an admin
    [refusal] = eventually(lambda: h.replies("U0EDITOR"), "the refusal")
    assert "admins" in refusal
    assert h.run_row().state == RunState.UNCERTAIN

    h.click_alert(ACTION_ALERT_PUBLISHED, "U0ADMIN")
    eventually(lambda: h.run_row().state == RunState.SUCCEEDED, "the run to succeed")
    [update] = eventually(lambda: h.slack.calls("chat.update"), "the alert to be updated")
    assert update.params["channel"] == ALERTS
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"]
    assert "U0ADMIN" in str(update.params["blocks"])
    h.bot.host.wait_idle(5)
    h.bot.reconcile()

    assert len(h.hook.posts) == 1
    assert list(h.hook.publications) == [HOOK_KEY]
    assert h.draft_row().state == DraftState.PUBLISHED
    assert len(h.slack.messages(ALERTS)) == 1


def test_a_draft_sent_back_for_a_stale_approval_gets_its_buttons_back(
    bot_harness: Callable[..., BotHarness], sqlite_url: str
) -> None:
    h = bot_harness(sqlite_url, status_url=True, defaults='approval_ttl = "1s"')
    assert h.bot.galley.draft(RECIPE, SLOT).key == KEY
    h.bot.sync_slack()
    h.approve()
    h.bot.sync_slack()  # the message now says who approved it
    time.sleep(1.2)  # the approval goes stale before publishing starts

    assert h.bot.publishing.publish_run(RUN).outcome == PublishOutcome.SENT_BACK
    h.bot.sync_slack()

    assert len(h.hook.posts) == 0
    [message] = h.slack.messages(REVIEW)
    actions = [b for b in message["blocks"] if b["type"] == "actions"]
    assert actions, "the review message offers no buttons for revision 2"
    [approve] = [e["value"] for e in actions[0]["elements"] if e["action_id"] == ACTION_APPROVE]
    assert parse_button_value(approve) == (KEY, 2)
    assert approve == button_value(KEY, 2)
    assert "approval was older than" in json.dumps(message["blocks"])  # and it says why
