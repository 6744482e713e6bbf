"""A reviewer's redraft (docs/design.md §22): the model's answer becomes the
next revision of the same draft; one request is one model call however often it is
made; a stale revision, a limit or a lost claim is refused and says so. On both
backends; assertions on rows and on the requests the drafter received."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from sqlmodel import col, select

from core.drafting.service import DraftingService
from core.drafting_policies import AttemptCause, AttemptOutcome, RedraftState
from core.errors import ModelCallFailed
from core.failpoints import hook
from core.models import AttemptRow, DraftRevisionRow, RedraftRow
from core.policies import Refusal, Verdict
from core.ports import DraftRequest, ModelReply
from core.review.queue import ReviewAnswer, decide, edit
from core.review.redraft_claims import RedraftClaim
from core.review.redrafting import RedraftService
from core.setup.config import Config, parse_config
from core.slots.schedule import slot_at_wall
from core.states import DraftState
from core.store.engine import Store
from core.store.rows import draft_row
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text

WALL = "2026-11-02T09:00"
ANA, BEN = "U0ANA", "U0BEN"
NOTE = "shorter, mention the launch date"


def config(*defaults: str, max_attempts: int = 4) -> Config:
    extra = "\n".join(defaults)
    text = config_text(pending_limit=10, max_attempts=max_attempts)
    return parse_config(text.replace("[defaults]\n", f"[defaults]\n{extra}\n"))


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime.fromisoformat("2026-11-02T09:05:00+00:00"))


def drafted(store: Store, clock: FrozenClock, cfg: Config) -> str:
    recipe = cfg.recipes["weekly-update"]
    drafting = DraftingService(store, InstantDrafter("The first draft."), clock=clock, worker="w1")
    result = drafting.draft_slot(recipe, slot_at_wall(recipe, datetime.fromisoformat(WALL)))
    assert result.key is not None, result
    return result.key


def ask(
    service: RedraftService, key: str, revision: int = 1, note: str = NOTE, user: str = ANA
) -> RedraftClaim | ReviewAnswer:
    return service.ask(draft_key=key, revision=revision, note=note, user=user, permitted=True)


def claimed(service: RedraftService, key: str, revision: int = 1) -> RedraftClaim:
    claim = ask(service, key, revision)
    assert isinstance(claim, RedraftClaim), claim
    return claim


def refused(answer: RedraftClaim | ReviewAnswer) -> ReviewAnswer:
    assert isinstance(answer, ReviewAnswer) and not answer.accepted, answer
    return answer


def the_draft(store: Store, key: str) -> tuple[str, int, str | None]:
    with store.read() as session:
        row = draft_row(session, key)
        assert row is not None
        return row.state, row.revision, row.text


def redraft_attempts(store: Store, key: str) -> list[AttemptRow]:
    with store.read() as session:
        return list(
            session.exec(
                select(AttemptRow).where(
                    col(AttemptRow.draft_key) == key, col(AttemptRow.cause) == AttemptCause.REDRAFT
                )
            ).all()
        )


def test_a_redraft_becomes_the_next_revision_of_the_same_draft(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config()
    key = drafted(store, clock, cfg)
    drafter = InstantDrafter("The shorter draft, launching 1 December.")
    service = RedraftService(store, cfg, clock, drafter, worker="w2")

    answer = service.run(claimed(service, key))

    assert answer.accepted and answer.item is not None and answer.item.revision == 2
    assert the_draft(store, key) == (
        DraftState.READY,
        2,
        "The shorter draft, launching 1 December.",
    )
    [request] = drafter.requests
    assert request.system == "You write concise updates."
    assert "The first draft." in request.prompt and NOTE in request.prompt
    [attempt] = redraft_attempts(store, key)
    assert attempt.outcome == "ok" and attempt.finished_at is not None
    with store.read() as session:
        revisions = session.exec(
            select(DraftRevisionRow).where(col(DraftRevisionRow.draft_key) == key)
        ).all()
        assert sorted(r.revision for r in revisions) == [1, 2]
        row = draft_row(session, key)
        assert row is not None and row.similar_score is not None  # scored for the new text


def test_one_request_made_three_times_calls_the_model_once(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config()
    key = drafted(store, clock, cfg)
    drafter = InstantDrafter("Redrafted.")
    service = RedraftService(store, cfg, clock, drafter, worker="w2")

    first = claimed(service, key)
    again = [refused(ask(service, key)) for _ in range(2)]
    service.run(first)
    after = refused(ask(service, key))

    assert drafter.calls == 1
    assert {a.refusal for a in again} == {Refusal.REDRAFTING}
    assert after.refusal == Refusal.EDITED  # revision 1 is no longer current
    assert the_draft(store, key)[1] == 2


def test_requests_made_at_once_claim_once(store: Store, clock: FrozenClock) -> None:
    cfg = config()
    key = drafted(store, clock, cfg)
    service = RedraftService(store, cfg, clock, InstantDrafter(), worker="w2")
    answers: list[RedraftClaim | ReviewAnswer] = []
    start = threading.Barrier(4)

    def request() -> None:
        start.wait(timeout=30)
        answers.append(ask(service, key))

    threads = [threading.Thread(target=request) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sum(isinstance(a, RedraftClaim) for a in answers) == 1
    with store.read() as session:
        assert len(session.exec(select(RedraftRow)).all()) == 1


def test_a_redraft_of_a_revision_no_longer_current_is_refused_and_says_so(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config()
    key = drafted(store, clock, cfg)
    edit(store, cfg, clock, draft_key=key, revision=1, text="Edited.", user=BEN, permitted=True)
    drafter = InstantDrafter()
    service = RedraftService(store, cfg, clock, drafter, worker="w2")

    answer = refused(ask(service, key, revision=1))

    assert answer.refusal == Refusal.EDITED and "edited since" in answer.message
    assert drafter.calls == 0 and the_draft(store, key) == (DraftState.READY, 2, "Edited.")


def test_an_answer_that_arrives_after_an_edit_is_paid_for_and_not_stored(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config()
    key = drafted(store, clock, cfg)
    release = threading.Event()
    drafter = InstantDrafter("Too late.", release=release)
    service = RedraftService(store, cfg, clock, drafter, worker="w2")
    claim = claimed(service, key)
    answers: list[ReviewAnswer] = []
    running = threading.Thread(target=lambda: answers.append(service.run(claim)))
    running.start()
    assert drafter.started.wait(timeout=30)

    edit(
        store,
        cfg,
        clock,
        draft_key=key,
        revision=1,
        text="Edited meanwhile.",
        user=BEN,
        permitted=True,
    )
    release.set()
    running.join(timeout=30)

    [answer] = answers
    assert not answer.accepted and "edited since" in answer.message
    assert the_draft(store, key) == (DraftState.READY, 2, "Edited meanwhile.")
    [attempt] = redraft_attempts(store, key)
    assert attempt.outcome == "ok" and attempt.output_tokens > 0  # paid, on record
    with store.read() as session:
        row = session.get(RedraftRow, claim.key)
        assert row is not None and row.state == RedraftState.FAILED


def test_a_holder_whose_claim_was_taken_over_stores_nothing(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config()
    key = drafted(store, clock, cfg)
    first = RedraftService(store, cfg, clock, InstantDrafter("From the dead holder."), worker="w2")
    second = RedraftService(store, cfg, clock, InstantDrafter("From the taker."), worker="w3")
    stalled = claimed(first, key)
    clock.advance(cfg.recipes["weekly-update"].takeover_after + timedelta(seconds=1))

    taken = second.take_over_expired(stalled.key)
    assert taken is not None
    late = first.run(stalled)
    done = second.run(taken)

    assert not late.accepted and done.accepted
    assert the_draft(store, key) == (DraftState.READY, 2, "From the taker.")


def test_a_holder_taken_over_while_its_call_was_out_stores_nothing(
    store: Store, clock: FrozenClock
) -> None:
    """The holder passed the fence before its call; while the call was out its lease
    lapsed and another took the claim over. Closing the claim names its owner: the late
    answer is paid for and not stored, and the taker's is."""
    cfg = config()
    key = drafted(store, clock, cfg)
    first = RedraftService(store, cfg, clock, InstantDrafter("From the dead holder."), worker="w2")
    second = RedraftService(store, cfg, clock, InstantDrafter("From the taker."), worker="w3")
    stalled = claimed(first, key)
    taken: list[RedraftClaim | None] = []

    def lapse_and_take_over() -> None:
        clock.advance(cfg.recipes["weekly-update"].takeover_after + timedelta(seconds=1))
        taken.append(second.take_over_expired(stalled.key))

    with hook("after_redraft_reply", lapse_and_take_over):
        late = first.run(stalled)
    assert not late.accepted
    assert the_draft(store, key)[1] == 1
    [claim] = taken
    assert claim is not None and second.run(claim).accepted

    assert the_draft(store, key) == (DraftState.READY, 2, "From the taker.")


def test_a_holder_whose_claim_was_taken_over_calls_no_model(
    store: Store, clock: FrozenClock
) -> None:
    """The fence before the call: a holder that stalled past its lease and was taken
    over pays for nothing (its claim is checked by owner and the database's clock)."""
    cfg = config()
    key = drafted(store, clock, cfg)
    late_model = InstantDrafter("From the dead holder.")
    first = RedraftService(store, cfg, clock, late_model, worker="w2")
    second = RedraftService(store, cfg, clock, InstantDrafter("From the taker."), worker="w3")
    stalled = claimed(first, key)
    clock.advance(cfg.recipes["weekly-update"].takeover_after + timedelta(seconds=1))
    assert second.take_over_expired(stalled.key) is not None

    late = first.run(stalled)

    assert not late.accepted
    assert late_model.calls == 0
    assert redraft_attempts(store, key) == []


def test_a_holder_whose_lease_lapsed_untaken_calls_no_model(
    store: Store, clock: FrozenClock
) -> None:
    """Nobody took the claim over yet, but its lease ran out (its heartbeat stalled): the
    fence judges the lease by the clock, not only by the owner, and nothing is paid."""
    cfg = config()
    key = drafted(store, clock, cfg)
    late_model = InstantDrafter("From a stalled holder.")
    holder = RedraftService(store, cfg, clock, late_model, worker="w2")
    stalled = claimed(holder, key)
    clock.advance(cfg.recipes["weekly-update"].takeover_after + timedelta(seconds=1))

    late = holder.run(stalled)

    assert not late.accepted and late.refusal == Refusal.REDRAFTING
    assert late_model.calls == 0
    assert redraft_attempts(store, key) == []


@pytest.mark.parametrize(
    ("setting", "attempts", "limit", "says"),
    [
        ("max_redrafts = 1", 4, Refusal.REDRAFT_LIMIT, "max_redrafts = 1"),
        ("max_redrafts = 5", 2, Refusal.ATTEMPT_LIMIT, "max_attempts = 2"),
        ("daily_token_budget = 60", 4, Refusal.BUDGET, "daily_token_budget spent"),
    ],
)
def test_past_a_limit_the_reviewer_is_told_which(
    store: Store, clock: FrozenClock, setting: str, attempts: int, limit: Refusal, says: str
) -> None:
    cfg = config(setting, max_attempts=attempts)  # each InstantDrafter call bills 30 tokens
    key = drafted(store, clock, cfg)
    drafter = InstantDrafter("Redrafted once.")
    service = RedraftService(store, cfg, clock, drafter, worker="w2")
    assert service.run(claimed(service, key)).accepted

    answer = refused(ask(service, key, revision=2))

    assert answer.refusal == limit and says in answer.message, answer.message
    assert drafter.calls == 1 and the_draft(store, key)[1] == 2


def test_a_redraft_starts_the_approval_count_again(store: Store, clock: FrozenClock) -> None:
    cfg = config("approvals_required = 2")
    key = drafted(store, clock, cfg)

    def approve(user: str, revision: int) -> ReviewAnswer:
        return decide(
            store,
            cfg,
            clock,
            draft_key=key,
            revision=revision,
            verdict=Verdict.APPROVED,
            user=user,
            permitted=True,
        )

    assert approve(ANA, 1).accepted
    service = RedraftService(store, cfg, clock, InstantDrafter("Redrafted."), worker="w2")
    assert service.run(claimed(service, key)).accepted
    assert "1 of 2" in approve(BEN, 2).message
    assert the_draft(store, key)[0] == DraftState.READY
    assert approve(ANA, 2).accepted and the_draft(store, key)[0] == DraftState.APPROVED


def test_the_requester_of_a_redraft_may_approve_it_when_editors_may_not(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config("editor_may_approve = false")
    key = drafted(store, clock, cfg)
    service = RedraftService(store, cfg, clock, InstantDrafter("Redrafted."), worker="w2")
    assert service.run(claimed(service, key)).accepted

    answer = decide(
        store,
        cfg,
        clock,
        draft_key=key,
        revision=2,
        verdict=Verdict.APPROVED,
        user=ANA,
        permitted=True,
    )

    assert answer.accepted and the_draft(store, key)[0] == DraftState.APPROVED


class RefusingDrafter:
    """A model API that rejects the request (400): not retried."""

    def __init__(self) -> None:
        self.calls = 0

    def draft(self, request: DraftRequest) -> ModelReply:
        self.calls += 1
        raise ModelCallFailed(AttemptOutcome.INVALID_REQUEST, "HTTP 400: bad", status=400)


def test_a_failed_redraft_is_told_changes_nothing_and_may_be_asked_again(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config()
    key = drafted(store, clock, cfg)
    refusing = RefusingDrafter()
    failed = RedraftService(store, cfg, clock, refusing, worker="w2").run(
        claimed(RedraftService(store, cfg, clock, refusing, worker="w2"), key)
    )

    assert not failed.accepted and "rejected the request" in failed.message
    assert the_draft(store, key) == (DraftState.READY, 1, "The first draft.")
    service = RedraftService(store, cfg, clock, InstantDrafter("Second time lucky."), worker="w3")
    assert service.run(claimed(service, key)).accepted
    assert the_draft(store, key) == (DraftState.READY, 2, "Second time lucky.")
    assert [a.outcome for a in redraft_attempts(store, key)] == ["invalid_request", "ok"]


def test_the_near_duplicate_score_is_computed_again_for_the_new_revision(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config()
    recipe = cfg.recipes["weekly-update"]
    seen = "Our launch is on 1 December: the new dashboard ships to every customer."
    earlier = DraftingService(store, InstantDrafter(seen), clock=clock, worker="w0")
    slot = slot_at_wall(recipe, datetime.fromisoformat("2026-10-26T09:00"))
    earlier_key = earlier.draft_slot(recipe, slot).key
    assert earlier_key is not None
    decide(
        store,
        cfg,
        clock,
        draft_key=earlier_key,
        revision=1,
        verdict=Verdict.APPROVED,
        user=BEN,
        permitted=True,
    )
    key = drafted(store, clock, cfg)  # "The first draft.": nothing like it
    with store.read() as session:
        before = draft_row(session, key)
        assert before is not None and (before.similar_score or 0) < 50

    service = RedraftService(store, cfg, clock, InstantDrafter(seen), worker="w2")
    assert service.run(claimed(service, key)).accepted

    with store.read() as session:
        after = draft_row(session, key)
        assert after is not None
        assert (after.similar_to, after.similar_score) == (earlier_key, 100)


def test_asking_again_after_the_holder_died_takes_its_claim_over_not_a_second_one(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config()
    key = drafted(store, clock, cfg)
    service = RedraftService(store, cfg, clock, InstantDrafter("Once."), worker="w2")
    dead = claimed(service, key)  # its process dies before calling the model
    live = refused(ask(service, key))  # the lease still runs: in progress
    clock.advance(cfg.recipes["weekly-update"].takeover_after + timedelta(seconds=1))

    again = claimed(service, key)

    assert live.refusal == Refusal.REDRAFTING
    assert again.key == dead.key and again.owner != dead.owner
    assert service.run(again).accepted and not service.run(dead).accepted
    assert the_draft(store, key) == (DraftState.READY, 2, "Once.")
