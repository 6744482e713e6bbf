"""An approved draft is published exactly once (docs/design.md §3, §4, §7, §9:
its states, the claim, the receipt and the look-up),
whatever interrupts it: a crash just before the call or right after the receipt, the
same trigger delivered twice (at once or in a row), a database restored from before
the send. A bumped version is a second, deliberate publication under another key; the
same key with another payload is a conflict that changes nothing.

In process, over real HTTP to the fake webhook and the fake Slack Web API
(tests/harness/worlds.py). Tests count what the destinations received and read receipts and
states from the database, never log lines. Both backends.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from sqlmodel import col, select

from core.errors import KeyPayloadConflict
from core.identity import text_hash
from core.models import DraftRow, EffectRow, RunRow
from core.policies import EffectDecision, FailReason, PublishOutcome
from core.ports import Fit, PostQuery, Publication, Publisher
from core.publishing.service import PublishingService
from core.states import DraftState, EffectState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.receipts import EffectSpec, EffectStart, Proof
from tests.harness.worlds import (
    ANNOUNCE,
    HOOK_KEY,
    KEY,
    KEY_V2,
    RECIPE,
    RUN,
    SLACK_KEY,
    Crash,
    HeldPublisher,
    MakeWorld,
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

    def lookup(self, query: PostQuery) -> str | None:
        return self.inner.lookup(query)

    def link(self, external_id: str) -> str | None:
        return self.inner.link(external_id)

    def fit(self, text: str) -> Fit | None:
        return self.inner.fit(text)


class CrashAfterReceipt(EffectLedger):
    """A ledger whose process dies right after the receipt's `succeeded` commit."""

    def succeed(self, start: EffectStart, proof: Proof) -> Any:
        super().succeed(start, proof)
        raise Crash("killed after the receipt commit")


def publish_payload(text: str, target: str = "webhook", key: str = KEY) -> dict[str, str]:
    """What a publish receipt's payload hash is taken over (core/publishing/service.py)."""
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
    result = w.service("w2").publish_run(RUN)  # never retried forever: the run fails, told
    assert result.outcome == PublishOutcome.FAILED
    assert result.detail is not None and "another text" in result.detail
    assert w.run_row().state == RunState.FAILED
    assert w.run_row().reason == FailReason.PUBLISH_REJECTED

    assert effect_fields(w.effect()) == before
    assert w.posts() == 1
    assert len(w.hook.lookups) == lookups
    assert list(w.hook.publications) == [HOOK_KEY]
    assert w.hook.publications[HOOK_KEY]["body"]["text"] != "Edited after publishing."
