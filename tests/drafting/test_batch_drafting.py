"""Batch drafting end to end in one process (docs/design.md §21): slots handed to a batch
under their claims, one batch for every due entry, a lost create found again, entries
stored under their own claim's fence, and the synchronous fallback once a wait runs out.

Driven through the real `anthropic` SDK against the fake over real HTTP, on SQLite and
PostgreSQL; each test counts what the fake received and what the database holds.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from sqlmodel import col, select

from core.api.analytics import daily_cost
from core.api.galley import Galley
from core.api.services import Services
from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting.attempts import Backoff
from core.drafting.batch_drafter import BatchDrafter
from core.drafting.batch_pass import BatchPass
from core.drafting_policies import AttemptOutcome, DraftOutcome
from core.failpoints import hook
from core.identity import batch_custom_id
from core.models import AttemptRow, BatchRow, DraftRow, RunRow
from core.operations.gauges import DatabaseGauges
from core.policies import FailReason, Overlap
from core.setup.config import parse_config
from core.slots.schedule import Slot, slot_at_wall
from core.states import BatchState, DraftState, RunState
from core.store.engine import Store
from core.telemetry.pricing import estimated_cost_usd
from core.testing import FrozenClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.anthropic_batches import accept_then_drop, drop, errored, status

CONFIG = """
[slack]
review_channel = "C0REVIEW"

[defaults]
timezone = "UTC"
model = "claude-test"
drafting = "batch"
batch_gather = "30s"
batch_deadline = "1h"
takeover_after = "8s"
max_attempts = {max_attempts}

[[recipes]]
name = "weekly-update"
platform = "linkedin"
schedule = "0 9 * * mon"
system = "You write concise updates."
prompt = "Write the weekly update for {{{{slot:%d %B %Y}}}}."

[[recipes]]
name = "daily-tip"
platform = "mastodon"
schedule = "0 9 * * *"
system = "You write one practical tip."
prompt = "Write today's tip."
"""
MONDAY_9 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
FAST = Backoff(base_seconds=0.01, cap_seconds=0.05)
POLL = timedelta(seconds=5)


class Deployment:
    """One database, one fake API and a frozen clock at the slot: the drafting service
    and a batch pass, as `galley run` wires them."""

    def __init__(self, store: Store, fake: FakeAnthropic, max_attempts: int = 4) -> None:
        self.store, self.fake = store, fake
        self.clock = FrozenClock(MONDAY_9)
        fake.batches.now = lambda: self.clock.now().timestamp()  # one clock for both sides
        self.config = parse_config(CONFIG.format(max_attempts=max_attempts))
        self.services = Services(
            self.config,
            store,
            drafter=AnthropicDrafter(api_key="test", base_url=fake.url),
            clock=self.clock,
            backoff=FAST,
            batch_client=BatchDrafter(api_key="test", base_url=fake.url),
        )

    def batch_pass(self) -> BatchPass:
        made = self.services.batch_pass()
        assert made is not None
        made.poll_every = POLL
        return made

    def slot(self, recipe: str) -> Slot:
        return slot_at_wall(self.config.recipe(recipe), datetime(2026, 11, 23, 9, 0))

    def fire(self, *recipes: str) -> list[Any]:
        """The scheduler's fire for Monday 09:00 of each recipe."""
        drafting = self.services.drafting
        return [drafting.draft_slot(self.config.recipe(r), self.slot(r)) for r in recipes]

    def later(self, delta: timedelta) -> None:
        self.clock.advance(delta)

    def sync_calls(self) -> int:
        return sum(1 for r in self.fake.requests if r.method == "POST" and r.path == "/v1/messages")

    def rows(self, table: type[Any]) -> list[Any]:
        with self.store.read() as session:
            return list(session.exec(select(table)).all())

    def drafts(self, state: DraftState = DraftState.READY) -> list[DraftRow]:
        return [d for d in self.rows(DraftRow) if d.state == state]

    def attempts(self) -> list[AttemptRow]:
        with self.store.read() as session:
            ordered = select(AttemptRow).order_by(col(AttemptRow.run_id), col(AttemptRow.number))
            return list(session.exec(ordered).all())

    def run(self, recipe: str) -> RunRow:
        with self.store.read() as session:
            found = session.get(RunRow, self.slot(recipe).run_id(recipe))
        assert found is not None
        return found


@pytest.fixture
def deployment(store: Store, fake_anthropic: FakeAnthropic) -> Deployment:
    return Deployment(store, fake_anthropic)


def test_due_slots_of_every_batch_recipe_go_out_as_one_batch_and_are_stored_once(
    deployment: Deployment,
) -> None:
    results = deployment.fire("weekly-update", "daily-tip")
    assert [r.outcome for r in results] == [DraftOutcome.BATCHED] * 2
    batches = deployment.batch_pass()

    batches.run_once()  # gathered for less than batch_gather: nothing is sent yet
    assert deployment.fake.batches.creates == []
    deployment.later(timedelta(seconds=30))
    batches.run_once()
    deployment.later(POLL)
    batches.run_once()

    [create] = deployment.fake.batches.creates
    assert len(create.body["requests"]) == 2
    assert deployment.sync_calls() == 0  # the model was paid once per slot, at batch price
    assert len(deployment.drafts()) == 2
    for recipe in ("weekly-update", "daily-tip"):
        assert deployment.run(recipe).state == RunState.AWAITING_REVIEW
    attempts = deployment.attempts()
    assert [(a.mode, a.outcome) for a in attempts] == [("batch", AttemptOutcome.OK)] * 2
    assert all(a.latency_ms is not None and a.latency_ms >= 30_000 for a in attempts)
    [batch] = deployment.rows(BatchRow)
    assert (batch.state, batch.size, batch.batch_id) == (
        BatchState.ENDED,
        2,
        deployment.fake.batches.created[0].id,
    )
    deployment.later(POLL)
    batches.run_once()  # nothing left to do: no request at all
    assert len(deployment.fake.batches.creates) == 1


def test_a_second_request_for_a_waiting_slot_never_pays_again(deployment: Deployment) -> None:
    deployment.fire("weekly-update")
    again = deployment.services.drafting.draft_slot(
        deployment.config.recipe("weekly-update"), deployment.slot("weekly-update"), manual=True
    )
    assert again.outcome == DraftOutcome.IN_PROGRESS
    deployment.later(timedelta(minutes=5))  # well past takeover_after: the claim still holds
    assert deployment.services.sweep() == []
    assert deployment.sync_calls() == 0
    assert len([a for a in deployment.attempts() if a.mode == "batch"]) == 1


def test_a_claim_whose_lease_ran_out_before_its_entry_was_written_writes_none(
    deployment: Deployment,
) -> None:
    """A batch entry begins as every model call does, fenced: a claim whose lease lapsed
    before its entry was written (a stalled process) holds nothing more, and the sweeper
    gives its slot back."""
    with hook("after_claim_commit", lambda: deployment.later(timedelta(seconds=9))):
        [result] = deployment.fire("weekly-update")  # takeover_after is 8s

    assert result.outcome == DraftOutcome.IN_PROGRESS
    assert deployment.attempts() == []
    [claimed] = deployment.drafts(DraftState.CLAIMED)
    assert claimed.lease_until is not None and claimed.lease_until < deployment.clock.now()
    assert deployment.services.sweep() == [claimed.key]
    assert deployment.run("weekly-update").state == RunState.PENDING


def test_a_create_whose_answer_was_lost_is_found_again_and_never_sent_twice(
    deployment: Deployment,
) -> None:
    deployment.fake.batches.script(accept_then_drop())
    deployment.fire("weekly-update")
    batches = deployment.batch_pass()
    deployment.later(timedelta(seconds=30))
    batches.run_once()  # the create reached the API; its answer did not reach Galley
    [row] = deployment.rows(BatchRow)
    assert (row.state, row.batch_id, row.may_exist) == (BatchState.SUBMITTING, None, True)

    for _ in range(3):
        deployment.later(timedelta(minutes=1))
        batches.run_once()

    assert len(deployment.fake.batches.creates) == 1
    [created] = deployment.fake.batches.created
    [row] = deployment.rows(BatchRow)
    assert (row.state, row.batch_id) == (BatchState.ENDED, created.id)
    assert len(deployment.drafts()) == 1
    assert deployment.sync_calls() == 0


def test_a_create_refused_with_529_is_sent_again_after_a_backoff(deployment: Deployment) -> None:
    deployment.fake.batches.script(status(529))
    deployment.fire("weekly-update")
    batches = deployment.batch_pass()
    deployment.later(timedelta(seconds=30))
    batches.run_once()
    [row] = deployment.rows(BatchRow)
    assert (row.state, row.may_exist) == (BatchState.SUBMITTING, False)  # nothing was created

    for _ in range(3):
        deployment.later(timedelta(minutes=1))
        batches.run_once()

    assert len(deployment.fake.batches.creates) == 2
    assert len(deployment.fake.batches.created) == 1
    assert len(deployment.drafts()) == 1


def test_an_entry_whose_wait_runs_out_is_drafted_synchronously_once(
    deployment: Deployment,
) -> None:
    deployment.fake.batches.hold = True
    deployment.fire("weekly-update")
    batches = deployment.batch_pass()
    deployment.later(timedelta(seconds=30))
    batches.run_once()
    deployment.later(timedelta(minutes=30))
    batches.run_once()
    assert deployment.sync_calls() == 0
    deployment.later(timedelta(minutes=31))  # past batch_deadline from the drafting fire

    batches.run_once()
    batches.run_once()  # a second pass finds the claim taken: no second call

    assert deployment.sync_calls() == 1
    [draft] = deployment.drafts()
    assert deployment.run("weekly-update").state == RunState.AWAITING_REVIEW
    [batch_attempt, sync_attempt] = deployment.attempts()
    assert (batch_attempt.mode, batch_attempt.outcome) == ("batch", AttemptOutcome.ABANDONED)
    assert (sync_attempt.mode, sync_attempt.outcome) == ("sync", AttemptOutcome.OK)
    # the batch no entry waits on any more is cancelled at its next poll, and its late
    # answer stores no second draft
    deployment.fake.batches.release()
    deployment.later(timedelta(minutes=1))
    batches.run_once()
    cancels = [r for r in deployment.fake.requests if r.path.endswith("/cancel")]
    assert len(cancels) == 1
    assert [d.key for d in deployment.drafts()] == [draft.key]


def test_an_errored_entry_goes_in_the_next_batch_until_its_attempts_are_spent(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    deployment = Deployment(store, fake_anthropic, max_attempts=2)
    key = f"linkedin|{deployment.slot('weekly-update').run_id('weekly-update')}|v1"
    deployment.fake.batches.script_entries({batch_custom_id(key): errored("overloaded_error")})
    deployment.fire("weekly-update")
    batches = deployment.batch_pass()
    for _ in range(6):
        deployment.later(timedelta(seconds=40))
        batches.run_once()

    assert len(deployment.fake.batches.creates) == 2
    assert deployment.sync_calls() == 0  # the retries were spent in batches
    run = deployment.run("weekly-update")
    assert (run.state, run.reason) == (RunState.FAILED, FailReason.ATTEMPTS_EXHAUSTED)
    assert [a.outcome for a in deployment.attempts()] == [AttemptOutcome.REJECTED_RETRYABLE] * 2


def test_an_entry_refused_for_good_fails_its_run_with_the_reason(
    deployment: Deployment,
) -> None:
    key = f"linkedin|{deployment.slot('weekly-update').run_id('weekly-update')}|v1"
    refused = errored("invalid_request_error", "max_tokens: too large")
    deployment.fake.batches.script_entries({batch_custom_id(key): refused})
    deployment.fire("weekly-update", "daily-tip")
    batches = deployment.batch_pass()
    for _ in range(3):
        deployment.later(timedelta(seconds=30))
        batches.run_once()

    run = deployment.run("weekly-update")
    assert (run.state, run.reason) == (RunState.FAILED, FailReason.INVALID_REQUEST)
    assert deployment.run("daily-tip").state == RunState.AWAITING_REVIEW
    assert len(deployment.fake.batches.creates) == 1


def test_two_passes_gathering_at_once_send_each_entry_in_one_batch(
    deployment: Deployment,
) -> None:
    """The second pass's gather runs between the first's read and its write: the first
    ties nothing (its UPDATE names `batch_ref IS NULL`) and sends nothing."""
    deployment.fire("weekly-update", "daily-tip")
    first, second = deployment.batch_pass(), deployment.batch_pass()
    deployment.later(timedelta(seconds=30))
    raced = threading.Event()

    def other_pass_first() -> None:
        if not raced.is_set():
            raced.set()
            second.gather()

    with hook("batch_gather_read", other_pass_first):
        sent = first.gather()

    assert raced.is_set()
    assert sent is None
    [create] = deployment.fake.batches.creates
    assert sorted(r["custom_id"] for r in create.body["requests"]) == sorted(
        batch_custom_id(d.key) for d in deployment.rows(DraftRow)
    )
    assert [b.state for b in deployment.rows(BatchRow)].count(BatchState.WAITING) == 1


def test_a_batch_leased_to_one_pass_is_not_polled_by_another_until_the_lease_lapses(
    deployment: Deployment,
) -> None:
    deployment.fire("weekly-update")
    first, second = deployment.batch_pass(), deployment.batch_pass()
    deployment.later(timedelta(seconds=30))
    ref = first.gather()
    assert ref is not None
    deployment.later(POLL)
    held = first._take(ref, "w1/lease")  # the first pass holds it, mid-poll
    assert held is not None
    polls_before = len([r for r in deployment.fake.requests if r.method == "GET"])

    second.advance(ref)
    assert len([r for r in deployment.fake.requests if r.method == "GET"]) == polls_before
    deployment.later(first.lease + timedelta(seconds=1))
    second.advance(ref)

    assert len(deployment.drafts()) == 1


def test_a_waiting_batch_is_not_taken_or_polled_before_its_next_poll_is_due(
    deployment: Deployment,
) -> None:
    deployment.fire("weekly-update")
    batch_pass = deployment.batch_pass()
    deployment.later(timedelta(seconds=30))
    ref = batch_pass.gather()
    assert ref is not None
    polls_before = len([r for r in deployment.fake.requests if r.method == "GET"])

    batch_pass.advance(ref)  # sent just now: its first poll is due POLL from now

    assert len([r for r in deployment.fake.requests if r.method == "GET"]) == polls_before
    [row] = deployment.rows(BatchRow)
    assert (row.state, row.leased_by, row.polls) == (BatchState.WAITING, None, 0)


def test_status_metrics_and_the_ledger_show_what_waits_in_a_batch_and_what_it_cost(
    deployment: Deployment,
) -> None:
    deployment.fire("weekly-update", "daily-tip")
    galley = Galley(deployment.config, deployment.store, services=deployment.services)
    gauges = DatabaseGauges()  # a collector of its own: nothing registered
    gauges.watch(deployment.store, deployment.config, deployment.clock)

    def waiting_gauge() -> dict[str, float]:
        [family] = [f for f in gauges.collect() if f.name == "galley_drafts_waiting_in_batch"]
        return {s.labels["recipe"]: s.value for s in family.samples}

    assert {r.name: r.in_batch for r in galley.status().recipes} == {
        "weekly-update": 1,
        "daily-tip": 1,
    }
    assert "in a batch" in str(galley.status())
    assert waiting_gauge() == {"weekly-update": 1, "daily-tip": 1}

    batches = deployment.batch_pass()
    for _ in range(2):
        deployment.later(timedelta(seconds=30))
        batches.run_once()

    assert {r.name: r.in_batch for r in galley.status().recipes} == {
        "weekly-update": 0,
        "daily-tip": 0,
    }
    assert waiting_gauge() == {"weekly-update": 0, "daily-tip": 0}
    [created] = deployment.fake.batches.created
    [entry] = galley.attempts(recipe="weekly-update")
    assert (entry.mode, entry.batch_id) == ("batch", created.id)
    assert entry.latency_ms == 60_000  # entered at the slot, its batch ended a minute later
    at_sync_price = estimated_cost_usd(entry.model, entry.input_tokens, entry.output_tokens)
    assert entry.est_cost_usd == pytest.approx(at_sync_price / 2)
    with deployment.store.read() as session:
        costs = {(p.recipe, p.mode) for p in daily_cost(session)}
    assert costs == {("weekly-update", "batch"), ("daily-tip", "batch")}


def test_two_passes_falling_back_at_once_draft_the_late_entry_once(
    deployment: Deployment,
) -> None:
    """The second pass takes the late entry over and drafts it between the first pass's
    read and its take-over: the first one's UPDATE names the owner it read, and leaves
    the stored draft alone."""
    deployment.fake.batches.hold = True
    deployment.fire("weekly-update")
    first, second = deployment.batch_pass(), deployment.batch_pass()
    deployment.later(timedelta(seconds=30))
    first.run_once()
    deployment.later(timedelta(hours=1))
    raced = threading.Event()

    def other_pass_first() -> None:
        if not raced.is_set():
            raced.set()
            assert second.entries.fall_back_late() == 1

    with hook("batch_late_read", other_pass_first):
        assert first.entries.fall_back_late() == 0

    assert deployment.sync_calls() == 1
    [draft] = deployment.drafts()
    assert (draft.claimed_by, draft.lease_until) == (None, None)
    assert [a.outcome for a in deployment.attempts()] == [
        AttemptOutcome.ABANDONED,
        AttemptOutcome.OK,
    ]


def test_a_pass_whose_create_answered_after_its_lease_was_taken_keeps_the_batch_found(
    deployment: Deployment,
) -> None:
    """The create answers late: meanwhile another pass took the lapsed lease and found the
    batch again. The late answer names that same batch, so nothing is cancelled and no
    second batch exists."""
    deployment.fire("weekly-update")
    first, second = deployment.batch_pass(), deployment.batch_pass()
    deployment.later(timedelta(seconds=30))

    def lease_lapses_and_another_pass_looks() -> None:
        deployment.later(first.lease + timedelta(seconds=1))
        [row] = deployment.rows(BatchRow)
        second.advance(row.id)

    with hook("after_batch_create", lease_lapses_and_another_pass_looks):
        first.gather()

    [created] = deployment.fake.batches.created
    assert len(deployment.fake.batches.creates) == 1
    assert not [r for r in deployment.fake.requests if r.path.endswith("/cancel")]
    [row] = deployment.rows(BatchRow)
    assert (row.state, row.batch_id) == (BatchState.WAITING, created.id)
    deployment.later(POLL)
    second.run_once()
    assert len(deployment.drafts()) == 1


def test_a_slot_waiting_in_a_batch_is_no_overlap_for_the_next_slot(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    """overlap = skip refuses a slot while the previous one is being drafted; an entry
    waiting in a batch costs nothing meanwhile, so the next slot joins the next batch."""
    hourly = CONFIG.format(max_attempts=4).replace(
        'schedule = "0 9 * * *"', 'schedule = "0 * * * *"'
    )
    deployment = Deployment(store, fake_anthropic)
    deployment.config = parse_config(
        hourly.replace('batch_deadline = "1h"', 'batch_deadline = "2h"')
    )
    deployment.fake.batches.hold = True
    recipe = deployment.config.recipe("daily-tip")
    drafting = deployment.services.drafting
    first = slot_at_wall(recipe, datetime(2026, 11, 23, 9, 0))
    second = slot_at_wall(recipe, datetime(2026, 11, 23, 10, 0))
    assert drafting.draft_slot(recipe, first, overlap=Overlap.SKIP).outcome == DraftOutcome.BATCHED
    deployment.later(timedelta(hours=1))

    assert drafting.draft_slot(recipe, second, overlap=Overlap.SKIP).outcome == DraftOutcome.BATCHED


def test_a_pass_whose_look_outlasted_its_lease_sends_nothing(deployment: Deployment) -> None:
    """A create was lost without reaching the API. While the first pass looks for it,
    its lease lapses and a second pass looks, finds none and sends it: the first one's
    send is refused by its fenced write, so the entries go out once more, not twice."""
    deployment.fake.batches.script(drop())  # nothing created, no answer
    deployment.fire("weekly-update")
    first, second = deployment.batch_pass(), deployment.batch_pass()
    deployment.later(timedelta(seconds=30))
    ref = first.gather()
    assert ref is not None
    deployment.later(timedelta(minutes=1))
    client = first.client
    look = client.find_again

    def slow_look(*args: Any, **kwargs: Any) -> Any:
        found = look(*args, **kwargs)
        deployment.later(first.lease + timedelta(seconds=1))
        second.advance(ref)  # the lease lapsed meanwhile: the second pass re-sends
        return found

    first.client = SimpleNamespace(  # type: ignore[assignment]
        find_again=slow_look,
        submit=client.submit,
        poll=client.poll,
        results=client.results,
        cancel=client.cancel,
    )
    first.advance(ref)

    assert len(deployment.fake.batches.creates) == 2  # the lost one, then one re-send
    assert len(deployment.fake.batches.created) == 1


def test_a_pass_whose_lease_lapsed_unseen_sends_nothing_and_the_next_pass_sends_once(
    deployment: Deployment,
) -> None:
    """A create was lost without reaching the API. The pass looking for it stalls past
    its lease, and no other pass has taken the row yet: the fence before the create
    checks the lease's expiry, not only its owner, so the stalled pass sends nothing;
    the next pass takes the lapsed row, looks, and sends it once."""
    deployment.fake.batches.script(drop())  # nothing created, no answer
    deployment.fire("weekly-update")
    first, second = deployment.batch_pass(), deployment.batch_pass()
    deployment.later(timedelta(seconds=30))
    ref = first.gather()
    assert ref is not None
    deployment.later(timedelta(minutes=1))
    client = first.client
    look = client.find_again

    def stalled_look(*args: Any, **kwargs: Any) -> Any:
        found = look(*args, **kwargs)
        deployment.later(first.lease + timedelta(seconds=1))  # and nobody takes it over
        return found

    first.client = SimpleNamespace(  # type: ignore[assignment]
        find_again=stalled_look,
        submit=client.submit,
        poll=client.poll,
        results=client.results,
        cancel=client.cancel,
    )
    first.advance(ref)
    assert len(deployment.fake.batches.creates) == 1  # the lost one only

    second.advance(ref)

    assert len(deployment.fake.batches.creates) == 2  # the lost one, then one re-send
    assert len(deployment.fake.batches.created) == 1


def test_a_lost_create_without_an_entry_whose_recipe_left_is_found_again_not_resent(
    deployment: Deployment,
) -> None:
    """Two entries gathered; one recipe left the config before the send, so one request
    went out and its answer was lost. The batch row counts what was sent, so the look
    for the lost create matches the real batch, and nothing is paid twice."""
    deployment.fire("weekly-update", "daily-tip")
    one_recipe = CONFIG.format(max_attempts=4).split('[[recipes]]\nname = "daily-tip"')[0]
    restarted = Services(
        parse_config(one_recipe),
        deployment.store,
        drafter=AnthropicDrafter(api_key="test", base_url=deployment.fake.url),
        clock=deployment.clock,
        backoff=FAST,
        batch_client=BatchDrafter(api_key="test", base_url=deployment.fake.url),
    )
    batches = restarted.batch_pass()
    assert batches is not None
    batches.poll_every = POLL
    deployment.fake.batches.script(accept_then_drop())
    deployment.later(timedelta(seconds=30))
    batches.run_once()  # one request sent, its answer lost
    [create] = deployment.fake.batches.creates
    assert len(create.body["requests"]) == 1
    [row] = deployment.rows(BatchRow)
    assert row.size == 1  # what was sent, not what was gathered

    for _ in range(3):
        deployment.later(timedelta(minutes=1))
        batches.run_once()

    assert len(deployment.fake.batches.creates) == 1
    assert deployment.run("weekly-update").state == RunState.AWAITING_REVIEW
