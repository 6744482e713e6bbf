"""Drafting over real HTTP against the fake Anthropic API, on SQLite and PostgreSQL.

Each test counts what the fake received and what the database holds, never log lines.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlmodel import col, select

import core.drafting.service
from core.api.galley import Galley
from core.api.services import Services
from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting.attempts import Backoff
from core.drafting_policies import AttemptOutcome, DraftOutcome
from core.identity import publish_effect_key
from core.models import AttemptRow, DraftRow, EffectRow, RunRow
from core.policies import EffectStep, FailReason, SkipReason
from core.states import DraftState, EffectState, RunState
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import make_config
from tests.fakes.anthropic_api import FakeAnthropic, closed_port, hang, ok, status
from tests.harness import rows
from tests.harness.approvals import approve

SLOT = "2026-11-23T09:00"
RUN = "weekly-update@2026-11-23T09:00"
FAST = Backoff(base_seconds=0.01, cap_seconds=0.05)


def galley_for(store: Store, base_url: str, **config: Any) -> Galley:
    drafter = AnthropicDrafter(api_key="test-key", base_url=base_url)
    return Galley(make_config(**config), store, drafter=drafter, backoff=FAST)


def attempts(store: Store) -> list[AttemptRow]:
    with store.transaction() as session:
        return list(session.exec(select(AttemptRow).order_by(col(AttemptRow.number))).all())


def drafts(store: Store) -> list[DraftRow]:
    with store.transaction() as session:
        return list(session.exec(select(DraftRow)).all())


def run_row(store: Store, run_id: str = RUN) -> RunRow:
    return rows.run_row(store, run_id)


def test_a_draft_is_stored_once_with_its_cost(store: Store, fake_anthropic: FakeAnthropic) -> None:
    galley = galley_for(store, fake_anthropic.url)

    first = galley.draft("weekly-update", SLOT)
    second = galley.draft("weekly-update", SLOT)

    assert (first.outcome, second.outcome) == (DraftOutcome.DRAFTED, DraftOutcome.EXISTS)
    assert len(fake_anthropic.requests) == 1
    body = fake_anthropic.requests[0].body
    assert body["model"] == "claude-test"
    assert body["messages"][0]["content"] == "Write the weekly update for 23 November 2026."
    assert "temperature" not in body
    [draft] = drafts(store)
    assert draft.state == DraftState.READY
    assert draft.key == "linkedin|weekly-update@2026-11-23T09:00|v1"
    assert draft.text == "Draft for: Write the weekly update for 23 November 2026."
    [attempt] = attempts(store)
    assert attempt.id == f"{RUN}#1"
    assert attempt.outcome == AttemptOutcome.OK
    assert (attempt.input_tokens, attempt.output_tokens) == (12, 34)
    assert attempt.request_id is not None and attempt.latency_ms is not None
    assert run_row(store).state == RunState.AWAITING_REVIEW


@pytest.mark.parametrize(
    ("fault", "outcome"),
    [
        (status(429, headers={"retry-after": "0.3"}), AttemptOutcome.REJECTED_RETRYABLE),
        (status(529), AttemptOutcome.REJECTED_RETRYABLE),
        (status(500), AttemptOutcome.REJECTED_RETRYABLE),
        (hang(5), AttemptOutcome.OUTCOME_UNKNOWN),
    ],
    ids=["429-retry-after", "529-overloaded", "500", "read-timeout"],
)
def test_retryable_failures_are_retried_under_the_same_claim(
    store: Store, fake_anthropic: FakeAnthropic, fault: Any, outcome: AttemptOutcome
) -> None:
    galley = galley_for(store, fake_anthropic.url, model_timeout="1s")
    fake_anthropic.script(fault, ok(text="second time lucky"))

    started = time.monotonic()
    result = galley.draft("weekly-update", SLOT)

    assert result.outcome == DraftOutcome.DRAFTED
    assert len(fake_anthropic.requests) == 2
    assert [a.outcome for a in attempts(store)] == [outcome, AttemptOutcome.OK]
    assert {a.draft_key for a in attempts(store)} == {result.key}
    [draft] = drafts(store)
    assert draft.text == "second time lucky"
    if fault.headers:  # Retry-After was honoured, not the tiny test backoff
        assert time.monotonic() - started >= 0.3


@pytest.mark.parametrize(
    ("code", "reason"),
    [(400, FailReason.INVALID_REQUEST), (401, FailReason.AUTH), (403, FailReason.AUTH)],
)
def test_invalid_and_auth_failures_fail_the_run_without_retry(
    store: Store, fake_anthropic: FakeAnthropic, code: int, reason: FailReason
) -> None:
    galley = galley_for(store, fake_anthropic.url)
    fake_anthropic.script(status(code))

    result = galley.draft("weekly-update", SLOT)

    assert (result.outcome, result.reason) == (DraftOutcome.FAILED, reason)
    assert f"HTTP {code}" in (result.detail or "")
    assert len(fake_anthropic.requests) == 1
    assert drafts(store) == []
    run = run_row(store)
    assert (run.state, run.reason) == (RunState.FAILED, reason)
    [attempt] = attempts(store)
    assert attempt.http_status == code


def test_connection_refused_is_retried_until_the_attempt_cap(store: Store) -> None:
    galley = galley_for(store, f"http://127.0.0.1:{closed_port()}", max_attempts=3)

    result = galley.draft("weekly-update", SLOT)

    assert (result.outcome, result.reason) == (DraftOutcome.FAILED, FailReason.ATTEMPTS_EXHAUSTED)
    assert [a.outcome for a in attempts(store)] == [AttemptOutcome.NOT_SENT] * 3
    assert drafts(store) == []


def test_a_429_storm_stops_at_the_attempt_cap(store: Store, fake_anthropic: FakeAnthropic) -> None:
    galley = galley_for(store, fake_anthropic.url, max_attempts=3)
    fake_anthropic.script(*[status(429, headers={"retry-after": "0"})] * 5)

    result = galley.draft("weekly-update", SLOT)

    assert result.reason == FailReason.ATTEMPTS_EXHAUSTED
    assert len(fake_anthropic.requests) == 3


def test_a_failed_run_drafted_again_gets_max_attempts_afresh(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    """The claim's INSERT counts the attempts earlier claims of the same key made
    (`attempts_before`), so max_attempts caps each claim, not the key's whole life."""
    drafter = AnthropicDrafter(api_key="test-key", base_url=fake_anthropic.url)
    services = Services(make_config(max_attempts=2), store, drafter=drafter, backoff=FAST)
    fake_anthropic.script(status(529), status(529), status(529), ok(text="third claim lucky"))
    first = Galley(services.config, store, services=services).draft("weekly-update", SLOT)
    assert first.reason == FailReason.ATTEMPTS_EXHAUSTED

    result = services.retry(RUN, actor="cli")

    assert not isinstance(result, str) and result.outcome == DraftOutcome.DRAFTED
    assert len(fake_anthropic.requests) == 4
    [draft] = drafts(store)
    assert (draft.attempts_before, draft.text) == (2, "third claim lucky")


def test_backpressure_skips_the_next_slot_without_calling_the_model(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    galley = galley_for(store, fake_anthropic.url, pending_limit=2)
    galley.draft("weekly-update", "2026-11-09T09:00")
    galley.draft("weekly-update", "2026-11-16T09:00")

    result = galley.draft("weekly-update", SLOT)

    assert (result.outcome, result.reason) == (DraftOutcome.SKIPPED, SkipReason.BACKPRESSURE)
    assert len(fake_anthropic.requests) == 2
    run = run_row(store)
    assert (run.state, run.reason) == (RunState.SKIPPED, SkipReason.BACKPRESSURE)
    assert [d.state for d in drafts(store)] == [DraftState.READY] * 2


def test_a_paused_recipe_skips_without_calling_the_model(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    galley = galley_for(store, fake_anthropic.url)
    galley.pause("all", actor="U0ADMIN", reason="holiday")

    paused = galley.draft("weekly-update", SLOT)
    galley.resume("weekly-update", actor="U0ADMIN")
    resumed = galley.draft("weekly-update", SLOT)

    assert (paused.outcome, paused.reason) == (DraftOutcome.SKIPPED, SkipReason.PAUSED)
    assert resumed.outcome == DraftOutcome.DRAFTED
    assert len(fake_anthropic.requests) == 1


def test_the_daily_token_budget_stops_drafting(store: Store, fake_anthropic: FakeAnthropic) -> None:
    config = make_config()
    recipe = config.recipes["weekly-update"].model_copy(update={"daily_token_budget": 40})
    config.recipes["weekly-update"] = recipe
    drafter = AnthropicDrafter(api_key="test-key", base_url=fake_anthropic.url)
    galley = Galley(config, store, drafter=drafter, backoff=FAST)
    galley.draft("weekly-update", "2026-11-16T09:00")  # 12 + 34 tokens: over budget now

    result = galley.draft("weekly-update", SLOT)

    assert (result.outcome, result.reason) == (DraftOutcome.SKIPPED, SkipReason.BUDGET)
    assert len(fake_anthropic.requests) == 1


def test_bump_is_the_only_way_to_a_second_draft_for_a_slot(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    galley = galley_for(store, fake_anthropic.url)
    galley.draft("weekly-update", SLOT)
    assert galley.draft("weekly-update", SLOT).outcome == DraftOutcome.EXISTS

    assert galley.bump("weekly-update", actor="U0ADMIN", reason="new tone") == 2
    again = galley.draft("weekly-update", SLOT)

    assert again.outcome == DraftOutcome.DRAFTED
    assert again.key == "linkedin|weekly-update@2026-11-23T09:00|v2"
    assert len(fake_anthropic.requests) == 2
    states = {d.version: d.state for d in drafts(store)}
    assert states == {1: DraftState.SUPERSEDED, 2: DraftState.READY}
    assert run_row(store).state == RunState.AWAITING_REVIEW


@pytest.mark.parametrize("sent", [False, True], ids=["unsent", "publish-in-flight"])
def test_a_slot_drafted_again_takes_its_approved_draft_out_unless_its_send_began(
    store: Store, sent: bool
) -> None:
    """v1 was approved and waits for its publication time when the recipe is bumped and
    the slot drafted again: v2 replaces it (or both would be published), unless v1's
    publication was already sent (in flight): a send is never disowned."""
    clock = FrozenClock()
    config = make_config()
    galley = Galley(config, store, drafter=InstantDrafter(), clock=clock)
    v1 = galley.draft("weekly-update", SLOT).key
    assert v1 is not None
    assert approve(store, config, clock, v1).accepted
    if sent:
        with store.transaction() as session:
            session.add(
                EffectRow(
                    key=publish_effect_key(v1, "linkedin"),
                    draft_key=v1,
                    step=EffectStep.PUBLISH,
                    payload_hash="0" * 64,
                    state=EffectState.IN_FLIGHT,
                    created_at=clock.now(),
                    updated_at=clock.now(),
                )
            )
    galley.bump("weekly-update", actor="U0ADMIN", reason="new tone")

    again = galley.draft("weekly-update", SLOT)

    assert again.outcome == DraftOutcome.DRAFTED, again
    states = {d.version: d.state for d in drafts(store)}
    v1_after = DraftState.APPROVED if sent else DraftState.SUPERSEDED
    assert states == {1: v1_after, 2: DraftState.READY}


def test_threads_racing_for_one_slot_make_one_model_call(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.delay = 0.5
    galley = galley_for(store, fake_anthropic.url)
    outcomes: list[DraftOutcome] = []
    barrier = threading.Barrier(8)

    def draft() -> None:
        barrier.wait()
        outcomes.append(galley.draft("weekly-update", SLOT).outcome)

    threads = [threading.Thread(target=draft) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(fake_anthropic.requests) == 1
    assert outcomes.count(DraftOutcome.DRAFTED) == 1
    assert set(outcomes) <= {DraftOutcome.DRAFTED, DraftOutcome.IN_PROGRESS, DraftOutcome.EXISTS}
    assert len(drafts(store)) == 1


def test_slot_given_with_an_offset_names_the_same_run(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    galley = galley_for(store, fake_anthropic.url)
    wall = galley.draft("weekly-update", SLOT)
    instant = galley.draft("weekly-update", datetime.fromisoformat("2026-11-23T09:00+00:00"))

    assert (wall.run, instant.run) == (RUN, RUN)
    assert instant.outcome == DraftOutcome.EXISTS


def test_lease_is_not_needed_past_the_call(store: Store, fake_anthropic: FakeAnthropic) -> None:
    galley = galley_for(store, fake_anthropic.url)
    galley.draft("weekly-update", SLOT)
    [draft] = drafts(store)
    assert (draft.claimed_by, draft.lease_until) == (None, None)
    assert draft.ready_at is not None and draft.ready_at <= datetime.now(draft.ready_at.tzinfo)
    assert timedelta(0) <= datetime.now(draft.ready_at.tzinfo) - draft.ready_at < timedelta(1)


def test_an_answer_whose_claim_was_taken_over_meanwhile_is_paid_for_and_not_stored(
    store: Store,
) -> None:
    """The store step finishes the attempt and stores the draft in one transaction; a
    holder whose claim was taken over during its call still has its call's cost on
    record (its attempt stays abandoned), and only the taker's draft is stored."""
    clock = FrozenClock()
    holder = Services(make_config(), store, drafter=InstantDrafter("late"), clock=clock)
    taker = Services(make_config(), store, drafter=InstantDrafter("taker's"), clock=clock)
    recipe = holder.recipe("weekly-update")
    slot = holder.resolve_slot(recipe, SLOT)
    taken: list[DraftOutcome] = []

    def answer_after_a_takeover(request: Any) -> Any:
        clock.advance(recipe.takeover_after + timedelta(seconds=1))  # the holder fell silent
        taken.append(taker.drafting.draft_slot(recipe, slot, manual=True).outcome)
        return InstantDrafter("late").draft(request)

    holder.drafting.drafter.draft = answer_after_a_takeover  # type: ignore[method-assign]
    late = holder.drafting.draft_slot(recipe, slot, manual=True)

    assert (taken, late.outcome) == ([DraftOutcome.DRAFTED], DraftOutcome.IN_PROGRESS)
    [draft] = drafts(store)
    assert (draft.state, draft.text) == (DraftState.READY, "taker's")
    first, second = attempts(store)
    assert (first.outcome, second.outcome) == (AttemptOutcome.ABANDONED, AttemptOutcome.OK)
    assert (first.input_tokens, first.output_tokens) == (second.input_tokens, second.output_tokens)
    assert first.output_tokens > 0  # the late answer was paid for, and counts


def test_a_store_that_fails_still_leaves_the_paid_call_on_record(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's transaction rolls back with the attempt's finish in it: the attempt
    is then finished by itself, so a paid call is never left looking unfinished."""
    galley = Galley(make_config(), store, drafter=InstantDrafter("paid"), clock=FrozenClock())

    def broken(*_args: Any) -> None:
        raise RuntimeError("the store step failed")

    monkeypatch.setattr(core.drafting.service, "make_ready", broken)
    with pytest.raises(RuntimeError):
        galley.draft("weekly-update", SLOT)

    [attempt] = attempts(store)
    assert (attempt.outcome, attempt.output_tokens) == (AttemptOutcome.OK, 20)
    assert attempt.finished_at is not None
    [draft] = drafts(store)
    assert draft.state == DraftState.CLAIMED  # not stored: the claim lapses and is swept
