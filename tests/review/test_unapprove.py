"""Unapprove (docs/design.md §23): an approved draft waiting for its slot goes back
to review until publishing starts, never after; racing the publish start, exactly one of
them wins. The review message says when it publishes, offers Unapprove, and is rewritten
on every approve / unapprove cycle.

Races are forced with hooks between each side's read and its write (core/failpoints.py),
on both backends; counted: POSTs at the fake webhook, rows, Slack calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlmodel import col, select

from core import failpoints
from core.models import RunRow
from core.policies import PublishOutcome, Refusal
from core.review.facts import AnnotatedReviewSurface
from core.review.outbox import ReviewOutbox
from core.review.queue import ReviewAnswer
from core.review.unapproval import unapprove
from core.states import DraftState, RunState
from core.store.effects import EffectLedger
from tests.harness.worlds import KEY, REVIEW, RUN, MakeWorld, World

SLOT = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
AHEAD = 'draft_ahead = "2d"'
WAIT = 10.0  # generous: each side is only ever held by the other's lock


def approved_ahead(worlds: MakeWorld, db_url: str) -> World:
    world = worlds(db_url, defaults=AHEAD)
    world.clock.set(SLOT - timedelta(days=1))
    world.approved()
    return world


def take_back(world: World, revision: int = 1) -> ReviewAnswer:
    return unapprove(
        world.store,
        world.config,
        world.clock,
        draft_key=KEY,
        revision=revision,
        user="U0EDITOR",
        permitted=True,
    )


class Side(threading.Thread):
    """One side of a race, run in its own thread; its answer or its error kept."""

    def __init__(self, work: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.work, self.answer, self.error = work, None, None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.answer = self.work()
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc
        finally:
            self.done.set()


def held_at(point: str) -> tuple[threading.Event, threading.Event, Any]:
    """A hook that stops the thread reaching `point` until `go` is set."""
    reached, go = threading.Event(), threading.Event()

    def hold() -> None:
        reached.set()
        assert go.wait(WAIT)

    return reached, go, failpoints.hook(point, hold)


def test_unapprove_before_the_slot_sends_it_back_and_nothing_goes_out(
    worlds: MakeWorld, db_url: str
) -> None:
    world = approved_ahead(worlds, db_url)
    answer = take_back(world)
    assert answer.accepted, answer.message
    run, draft = world.run_row(), world.draft_row()
    assert (run.state, run.publish_at) == (RunState.AWAITING_REVIEW, None)
    assert (draft.state, draft.revision, draft.decided_by) == (DraftState.READY, 2, None)

    world.clock.set(SLOT)
    assert world.service().publish_pending() == []
    assert world.posts() == 0


def test_unapprove_after_publication_is_refused_saying_so(worlds: MakeWorld, db_url: str) -> None:
    world = approved_ahead(worlds, db_url)
    world.clock.set(SLOT)
    world.service().publish_pending()
    answer = take_back(world)
    assert not answer.accepted and answer.refusal == Refusal.PUBLISHING_STARTED
    assert "already started" in answer.message
    assert world.posts() == 1 and world.draft_row().state == DraftState.PUBLISHED


def test_unapprove_of_a_draft_its_run_no_longer_holds_changes_nothing(
    worlds: MakeWorld, db_url: str
) -> None:
    """Both approved, but the run has moved on to another draft (run_holds): the old
    draft's Unapprove must not carry the run back to review."""
    world = approved_ahead(worlds, db_url)
    with world.store.transaction() as session:
        run = session.exec(select(RunRow).where(col(RunRow.id) == RUN)).one()
        run.draft_key = KEY + "-next"
        session.add(run)
    answer = take_back(world)
    assert not answer.accepted and answer.refusal == Refusal.NOT_APPROVED
    assert world.run_row().state == RunState.APPROVED
    assert world.draft_row().state == DraftState.APPROVED


def test_unapprove_racing_a_publish_start_that_read_first_is_refused_and_it_publishes(
    worlds: MakeWorld, db_url: str
) -> None:
    """The publish start has read the approved run and holds its lock; Unapprove waits
    for it, then sees publishing under way: the publication happens, once."""
    world = approved_ahead(worlds, db_url)
    world.clock.set(SLOT)
    reached, go, hooked = held_at("publish_start_read")
    with hooked:
        publisher = Side(lambda: world.service().publish_run(RUN))
        publisher.start()
        assert reached.wait(WAIT)
        clicker = Side(lambda: take_back(world))
        clicker.start()
        assert not clicker.done.wait(1.0), "Unapprove must wait for the publish start's lock"
        go.set()
        publisher.join(WAIT)
        clicker.join(WAIT)
    assert publisher.error is None and clicker.error is None, (publisher.error, clicker.error)
    assert publisher.answer is not None and publisher.answer.outcome == PublishOutcome.PUBLISHED
    answer: ReviewAnswer = clicker.answer  # type: ignore[assignment]
    assert not answer.accepted and answer.refusal == Refusal.PUBLISHING_STARTED
    assert world.posts() == 1
    assert (world.run_row().state, world.draft_row().state) == (
        RunState.SUCCEEDED,
        DraftState.PUBLISHED,
    )


def test_a_publish_start_racing_an_unapprove_that_read_first_publishes_nothing(
    worlds: MakeWorld, db_url: str
) -> None:
    """Unapprove has read the approved run and holds its lock; the publish pass waits for
    it, then finds the run back in review: nothing is published."""
    world = approved_ahead(worlds, db_url)
    world.clock.set(SLOT)
    reached, go, hooked = held_at("unapprove_read")
    with hooked:
        clicker = Side(lambda: take_back(world))
        clicker.start()
        assert reached.wait(WAIT)
        publisher = Side(lambda: world.service().publish_pending())
        publisher.start()
        assert not publisher.done.wait(1.0), "the publish start must wait for Unapprove's lock"
        go.set()
        clicker.join(WAIT)
        publisher.join(WAIT)
    assert clicker.error is None and publisher.error is None, (clicker.error, publisher.error)
    answer: ReviewAnswer = clicker.answer  # type: ignore[assignment]
    assert answer.accepted, answer.message
    assert world.posts() == 0
    assert (world.run_row().state, world.draft_row().state) == (
        RunState.AWAITING_REVIEW,
        DraftState.READY,
    )


def _outbox(world: World) -> ReviewOutbox:
    from bot.slack_surface import SlackReviewSurface

    surface = AnnotatedReviewSurface(
        SlackReviewSurface(world.channels, REVIEW), world.store, world.config, world.clock
    )
    ledger = EffectLedger(world.store, world.clock, "outbox")
    return ReviewOutbox(world.store, ledger, surface, channel=REVIEW, call_lease=timedelta(1))


def _shown(world: World) -> tuple[str, list[str]]:
    [message] = [m for m in world.slack.messages(REVIEW) if m.get("metadata")]
    text = " ".join(
        str(e.get("text", "")) for b in message["blocks"] for e in b.get("elements", [])
    )
    buttons = [
        e["text"]["text"]
        for b in message["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
    ]
    return text, buttons


def test_the_message_says_when_it_publishes_and_follows_every_unapprove_cycle(
    worlds: MakeWorld, db_url: str
) -> None:
    world = worlds(db_url, defaults=AHEAD)
    world.clock.set(SLOT - timedelta(days=1))
    outbox = _outbox(world)
    world.draft()
    assert outbox.post_ready_drafts() == 1
    for revision in (1, 2, 3):
        assert world.approve(KEY, revision=revision).accepted
        assert outbox.sync_messages() == 1
        text, buttons = _shown(world)
        assert "Approved by <@U0EDITOR> · publishes Mon 23 Nov 09:00 (Europe/London)" in text
        assert buttons == ["Unapprove"]
        if revision < 3:
            assert take_back(world, revision).accepted
            assert outbox.sync_messages() == 1
            text, buttons = _shown(world)
            assert buttons[:3] == ["Approve", "Reject", "Edit"]
            assert "approval taken back by U0EDITOR" in text
    assert outbox.sync_messages() == 0  # shown already: nothing rewritten twice
    assert len(world.slack.calls("chat.update")) == 5
