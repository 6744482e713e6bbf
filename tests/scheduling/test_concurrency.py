"""Never twice, never lost, when two things happen at once: states, claims and leases,
and people told (docs/design.md §3, §4-§5, §12).

Each test forces one interleaving (a failpoint hook between a read and the write that
depends on it, an event that holds a call open, or a barrier) on SQLite and PostgreSQL,
and checks final state: rows, and what the fakes received. Where SQLite's single writer
makes an interleaving impossible, the test says so and runs on PostgreSQL only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlmodel import col, select

from bot.blocks import backpressure_text
from bot.slack_surface import SlackReviewSurface
from core.api.galley import Galley
from core.api.services import Services
from core.drafting.claims import Claim, claim_slot
from core.drafting.service import DraftingService
from core.drafting.sweeper import sweep_expired_claims
from core.drafting_policies import DraftOutcome
from core.errors import LostClaim
from core.failpoints import hook
from core.models import AttemptRow, DraftRow, EffectRow, RecipeRow, RunRow
from core.policies import PublishOutcome
from core.ports import (
    BackpressureNotice,
    Fit,
    MessageRef,
    ModelReply,
    PostQuery,
    Publication,
    Publisher,
    ReviewItem,
)
from core.review.outbox import ReviewOutbox
from core.setup.config import Recipe
from core.states import DraftState, EffectState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter, RunningClock
from tests.conftest import make_config
from tests.fakes.slack_api import rate_limited
from tests.harness.approvals import approve
from tests.harness.processes import wait_for
from tests.harness.races import a_backend_waits_on_a_lock, in_thread, skip_on_sqlite
from tests.harness.rows import run_row
from tests.harness.timing import scaled
from tests.harness.worlds import ANNOUNCE, REVIEW, RUN, SLOT, MakeWorld, World, slack_channels

RECIPE = "weekly-update"


def rows(store: Store, table: type[Any]) -> list[Any]:
    with store.transaction() as session:
        return list(session.exec(select(table)).all())


def one_run(store: Store, run_id: str = RUN) -> RunRow:
    return run_row(store, run_id)


def drafts_by_key(store: Store) -> dict[str, DraftRow]:
    return {d.key: d for d in rows(store, DraftRow)}


def held_claim(store: Store) -> tuple[FrozenClock, Recipe, DraftingService, Claim]:
    """The slot claimed by a worker named "holder", on a frozen clock."""
    clock = FrozenClock()
    services = Services(make_config(), store, clock=clock)
    recipe = services.recipe(RECIPE)
    slot = services.resolve_slot(recipe, SLOT)
    holder = DraftingService(store, InstantDrafter(), clock=clock, worker="holder")
    claim = claim_slot(store, recipe, slot, worker="holder", actor="t", manual=True, clock=clock)
    assert isinstance(claim, Claim)
    return clock, recipe, holder, claim


# --- claims and the sweeper ---------------------------------------------------------------


def test_the_sweeper_never_deletes_a_claim_whose_draft_was_stored_meanwhile(
    store: Store, db_url: str
) -> None:
    """The holder missed beats (a long GC pause, a slow disk) but is alive: it stores
    its draft between the sweeper's read and its delete. The draft must survive."""
    skip_on_sqlite(db_url)
    clock, recipe, holder, claim = held_claim(store)
    number = holder._begin_attempt(recipe, claim)
    assert number is not None
    clock.advance(recipe.takeover_after + timedelta(seconds=1))
    reply = ModelReply("the paid answer", "m", "req", "end_turn", 10, 20, 0, 0)

    def store_it() -> object:  # the holder stores its answer between the read and the delete
        return holder._store_draft(recipe, claim, (reply, number, 0.0), None)

    with hook("sweeper_after_read", store_it):
        swept = sweep_expired_claims(store, clock)

    assert swept == []
    [draft] = rows(store, DraftRow)
    assert (draft.state, draft.text) == (DraftState.READY, "the paid answer")
    assert one_run(store).state == RunState.AWAITING_REVIEW


def test_the_sweeper_leaves_a_claim_renewed_after_its_read(store: Store, db_url: str) -> None:
    skip_on_sqlite(db_url)
    clock, recipe, _, claim = held_claim(store)
    clock.advance(recipe.takeover_after + timedelta(seconds=1))

    def renew() -> None:
        from core.drafting.claims import renew_lease

        assert renew_lease(store, claim, recipe.takeover_after, clock)

    with hook("sweeper_after_read", renew):
        assert sweep_expired_claims(store, clock) == []

    [draft] = rows(store, DraftRow)
    assert (draft.state, draft.claimed_by) == (DraftState.CLAIMED, claim.owner)
    assert one_run(store).state == RunState.RUNNING


def test_an_attempt_begun_while_a_takeover_holds_the_claim_waits_and_makes_no_call(
    store: Store, db_url: str
) -> None:
    """A takeover has changed the claim, not yet committed, when the old holder begins
    its next attempt: the holder's check waits for the draft row, then finds the claim
    gone and adds no attempt. Read without the row lock, the claim would still look
    like the holder's, and it would pay for a call the new owner pays for too."""
    skip_on_sqlite(db_url)
    _, recipe, holder, claim = held_claim(store)

    def begin() -> str:
        try:
            return f"attempt {holder._begin_attempt(recipe, claim)}"
        except LostClaim:
            return "lost"

    with store.engine.connect() as taker:
        takeover = taker.begin()
        taker.execute(
            sa.update(DraftRow)
            .where(col(DraftRow.key) == claim.draft_key)
            .values(claimed_by="taker/0001")
        )
        thread, results = in_thread(begin)
        wait_for(
            lambda: not thread.is_alive() or a_backend_waits_on_a_lock(store),
            30,
            "the holder to wait for the draft row (or to finish without waiting)",
        )
        takeover.commit()
    thread.join(timeout=scaled(30))

    assert results == ["lost"]
    assert rows(store, AttemptRow) == []


# --- a bump or a refusal while a draft is being written ------------------------------------


@dataclass
class Drafting:
    """A slot whose draft is being written right now, held open by the model."""

    store: Store
    galley: Galley
    drafter: InstantDrafter
    thread: threading.Thread = field(init=False)
    results: list[Any] = field(init=False)

    def start(self) -> Drafting:
        self.thread, self.results = in_thread(self.galley.draft, RECIPE, SLOT)
        assert self.drafter.started.wait(10)
        return self

    def finish(self) -> Any:
        self.drafter.release.set()
        self.thread.join(30)
        [result] = self.results
        return result


@pytest.fixture
def drafting(store: Store) -> Iterator[Drafting]:
    drafter = InstantDrafter(release=threading.Event())
    galley = Galley(make_config(pending_limit=5), store, drafter=drafter)
    held = Drafting(store, galley, drafter).start()
    yield held
    drafter.release.set()
    held.thread.join(30)


def test_a_bump_while_drafting_keeps_the_paid_draft_and_redrafts_the_slot(
    drafting: Drafting, store: Store
) -> None:
    galley = drafting.galley
    assert galley.bump(RECIPE, actor="U0ADMIN") == 2
    manual = galley.draft(RECIPE, SLOT)  # a person asks for the slot again meanwhile
    assert manual.outcome == DraftOutcome.IN_PROGRESS

    stored = drafting.finish()

    assert stored.outcome == DraftOutcome.DRAFTED
    v1 = drafts_by_key(store)[f"linkedin|{RUN}|v1"]
    assert (v1.state, v1.text) == (DraftState.SUPERSEDED, "draft 1")  # paid for, kept
    assert one_run(store).state == RunState.PENDING  # given back for v2
    again = galley.draft(RECIPE, SLOT)
    assert (again.outcome, again.key) == (DraftOutcome.DRAFTED, f"linkedin|{RUN}|v2")
    assert one_run(store).state == RunState.AWAITING_REVIEW
    assert drafting.drafter.calls == 2


@pytest.mark.parametrize("refusal", ["paused", "backpressure"])
def test_a_refused_request_while_drafting_does_not_strand_the_draft(
    drafting: Drafting, store: Store, refusal: str
) -> None:
    galley = drafting.galley
    galley.bump(RECIPE, actor="U0ADMIN")
    if refusal == "paused":
        galley.pause(RECIPE, actor="U0ADMIN")
    else:  # four ready drafts and the live claim fill pending_limit = 5
        instant = Galley(make_config(pending_limit=5), store, drafter=InstantDrafter())
        for week in ("2026-10-26T09:00", "2026-11-02T09:00", "2026-11-09T09:00", "2026-11-16"):
            instant.draft(RECIPE, week if "T" in week else f"{week}T09:00")
        assert instant.draft(RECIPE, "2026-10-19T09:00").reason == "backpressure"

    refused = galley.draft(RECIPE, SLOT)  # the v2 request for the slot being drafted

    assert refused.outcome == DraftOutcome.IN_PROGRESS
    assert one_run(store).state == RunState.RUNNING
    assert drafting.finish().outcome == DraftOutcome.DRAFTED
    v1 = drafts_by_key(store)[f"linkedin|{RUN}|v1"]
    assert (v1.state, v1.text) == (DraftState.SUPERSEDED, "draft 1")
    assert one_run(store).state == RunState.PENDING


# --- people and bumps -----------------------------------------------------------------------


def test_ten_bumps_at_once_raise_the_version_by_ten(store: Store) -> None:
    galley = Galley(make_config(), store)
    galley.bump(RECIPE, actor="setup")  # the recipe row exists: ten updates of one row
    barrier = threading.Barrier(10)

    def bump() -> int:
        barrier.wait(10)
        return Galley(make_config(), store).bump(RECIPE, actor="U0ADMIN")

    threads = [in_thread(bump) for _ in range(10)]
    for thread, _ in threads:
        thread.join(30)

    assert sorted(r for _, results in threads for r in results) == list(range(3, 13))
    [recipe] = rows(store, RecipeRow)
    assert recipe.version == 12


def test_an_approval_racing_a_bump_never_leaves_a_superseded_draft_to_publish(
    store: Store,
) -> None:
    """The bump reads the waiting drafts; an approval of one of them arrives before the
    bump writes. One of them wins whole: never an approved run on a superseded draft."""
    clock = FrozenClock()
    config = make_config()
    galley = Galley(config, store, drafter=InstantDrafter(), clock=clock)
    key = galley.draft(RECIPE, SLOT).key
    assert key is not None
    answers: list[Any] = []
    approvals: list[threading.Thread] = []

    def approve_now() -> None:
        answers.append(approve(store, config, clock, key))

    def approve_meanwhile() -> None:
        approvals.append(threading.Thread(target=approve_now, daemon=True))
        approvals[0].start()
        approvals[0].join(1.0)  # it waits for the bump's lock, or (unguarded) wins outright

    with hook("bump_after_read", approve_meanwhile):
        galley.bump(RECIPE, actor="U0ADMIN")
    approvals[0].join(30)

    draft, run = drafts_by_key(store)[key], one_run(store)
    [answer] = answers
    assert (draft.state, run.state) in (
        (DraftState.SUPERSEDED, RunState.PENDING),  # the bump won; the click is refused
        (DraftState.APPROVED, RunState.APPROVED),  # the approval won; nothing superseded
    )
    assert answer.accepted == (draft.state == DraftState.APPROVED)


# --- slow calls keep their receipts ---------------------------------------------------------


def _reconcile_until(done: threading.Event, publish: Any) -> None:
    """Another replica's reconciler, passing every 0.3 s while the first call waits."""
    while not done.wait(0.3):
        publish()


def test_a_publish_that_waits_out_429s_longer_than_its_lease_is_sent_once(
    worlds: MakeWorld, db_url: str
) -> None:
    w: World = worlds(db_url, target="slack")  # call_timeout 1 s: a receipt lease of 4 s
    w.approved()
    w.clock = w.core.clock = RunningClock(w.clock.now())
    w.slack.script("chat.postMessage", *[rate_limited(1)] * 6)  # about 6 s of Retry-After
    first = w.service("replica-1", ledger=EffectLedger(w.store, w.clock, "replica-1"))
    second = w.service("replica-2", ledger=EffectLedger(w.store, w.clock, "replica-2"))
    done = threading.Event()
    rival = threading.Thread(
        target=_reconcile_until, args=(done, lambda: second.publish_pending()), daemon=True
    )
    rival.start()

    try:
        result = first.publish_run(RUN)
    finally:
        done.set()
        rival.join(30)

    assert result.outcome == PublishOutcome.PUBLISHED
    assert len(w.slack.messages(ANNOUNCE)) == 1
    assert w.run_row().state == RunState.SUCCEEDED
    [receipt] = w.publish_effects()
    assert (receipt.state, receipt.tries) == (EffectState.SUCCEEDED, 1)


def test_a_review_post_that_waits_out_429s_is_posted_once_across_two_replicas(
    worlds: MakeWorld, db_url: str
) -> None:
    w: World = worlds(db_url)
    w.draft()
    clock = RunningClock(w.clock.now())
    w.slack.script("chat.postMessage", *[rate_limited(1)] * 6)

    def outbox(name: str) -> ReviewOutbox:
        return ReviewOutbox(
            w.store,
            EffectLedger(w.store, clock, name),
            SlackReviewSurface(slack_channels(w.slack), REVIEW),
            channel=REVIEW,
            call_lease=timedelta(seconds=4),  # 4 x call_timeout, as the bot sets it
        )

    first, second = outbox("replica-1"), outbox("replica-2")
    done = threading.Event()
    rival = threading.Thread(
        target=_reconcile_until, args=(done, second.post_ready_drafts), daemon=True
    )
    rival.start()

    try:
        first.post_ready_drafts()
    finally:
        done.set()
        rival.join(30)
    second.post_ready_drafts()

    assert len(w.slack.messages(REVIEW)) == 1
    [receipt] = [e for e in rows(w.store, EffectRow) if e.step == "review"]
    assert (receipt.state, receipt.tries) == (EffectState.SUCCEEDED, 1)


# --- cancel and an in-flight publish -------------------------------------------------------


class GatedPublisher:
    """Wraps a publisher: `before_lookup` runs as the pass looks; `publish` can be held."""

    def __init__(self, inner: Publisher, before_lookup: Any = None) -> None:
        self.inner = inner
        self.before_lookup = before_lookup
        self.sending = threading.Event()
        self.release = threading.Event()
        self.release.set()

    @property
    def target(self) -> str:
        return self.inner.target

    def lookup(self, query: PostQuery) -> str | None:
        if self.before_lookup is not None:
            self.before_lookup()
        return self.inner.lookup(query)

    def link(self, external_id: str) -> str | None:
        return self.inner.link(external_id)

    def fit(self, text: str) -> Fit | None:
        return self.inner.fit(text)

    def publish(self, publication: Publication) -> str:
        self.sending.set()
        self.release.wait(30)
        return self.inner.publish(publication)


def test_cancel_before_the_send_stops_the_publication(worlds: MakeWorld, db_url: str) -> None:
    w: World = worlds(db_url)
    w.approved()
    answers: list[str] = []
    gated = GatedPublisher(
        w.publisher(w.recipe), lambda: answers.append(w.resolver().cancel(RUN, actor="U0ADMIN"))
    )

    result = w.service(publisher=gated).publish_run(RUN)

    assert result.outcome == PublishOutcome.NOT_READY
    assert w.posts() == 0
    assert w.run_row().state == RunState.CANCELLED
    assert "Effects already completed: none." in answers[0]
    [receipt] = w.publish_effects()
    assert receipt.state == EffectState.FAILED


def test_cancel_during_the_send_says_so_and_lists_it_once_known(
    worlds: MakeWorld, db_url: str
) -> None:
    w: World = worlds(db_url)
    w.approved()
    gated = GatedPublisher(w.publisher(w.recipe))
    gated.release.clear()
    thread, results = in_thread(w.service(publisher=gated).publish_run, RUN)
    assert gated.sending.wait(10)

    answer = w.resolver().cancel(RUN, actor="U0ADMIN")
    gated.release.set()
    thread.join(30)

    assert "in flight" in answer and "|publish:webhook" in answer
    assert results[0].outcome == PublishOutcome.PUBLISHED
    assert w.posts() == 1
    run = w.run_row()
    assert run.state == RunState.CANCELLED
    assert run.reason is not None and "completed after cancellation" in run.reason
    assert "pub_1" in run.reason


# --- backpressure notices ------------------------------------------------------------------


class RecordingSurface:
    """A review surface in memory: what an outbox posted, in order."""

    def __init__(self) -> None:
        self.notices: list[str] = []
        self.posts: list[str] = []

    def post_review(self, item: ReviewItem) -> MessageRef:
        self.posts.append(item.draft_key)
        return MessageRef(REVIEW, f"{len(self.posts)}.0")

    def find_review(self, draft_key: str) -> MessageRef | None:
        return None

    def update_review(self, ref: MessageRef, item: ReviewItem) -> None:
        return None

    def announce(self, notice: BackpressureNotice) -> MessageRef:
        self.notices.append(backpressure_text(notice))
        return MessageRef(REVIEW, f"n{len(self.notices)}")


def test_backpressure_notices_survive_the_waiting_count_changing(store: Store) -> None:
    clock = FrozenClock()
    config = make_config(pending_limit=1)
    galley = Galley(config, store, drafter=InstantDrafter(), clock=clock)
    surface = RecordingSurface()
    outbox = ReviewOutbox(
        store, EffectLedger(store, clock, "bot"), surface, channel=REVIEW, call_lease=timedelta(1)
    )
    first = galley.draft(RECIPE, "2026-11-16T09:00")
    assert galley.draft(RECIPE, SLOT).reason == "backpressure"
    assert outbox.announce_backpressure({RECIPE: 1}) == 1  # "paused: 1 draft waiting"

    assert first.key is not None
    assert approve(store, config, clock, first.key).accepted
    outbox.announce_backpressure({RECIPE: 1})  # the count in the text is now 0
    assert galley.draft(RECIPE, SLOT).outcome == DraftOutcome.DRAFTED  # drafting resumes
    told = outbox.announce_backpressure({RECIPE: 1})

    assert told == 1
    assert len(surface.notices) == 2
    assert surface.notices[0].startswith("Drafting paused")
    assert surface.notices[1] == f"Drafting resumed for *{RECIPE}*."
