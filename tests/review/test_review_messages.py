"""The outbox finds review messages to update by what is pending, not by history:
each decision or edit reaches its message once, and a pass with nothing
pending writes nothing. Counts what the review surface received and the rows stored.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import sqlalchemy as sa
from alembic import command
from sqlmodel import col, select

from core.drafting.service import DraftingService
from core.identity import review_effect_key
from core.models import DraftRow, EffectRow, EventRow
from core.policies import Verdict
from core.ports import BackpressureNotice, DraftRequest, MessageRef, ModelReply, ReviewItem
from core.review.outbox import ReviewOutbox
from core.review.queue import decide, edit
from core.slots.schedule import slot_at_wall
from core.states import EffectState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.testing import FrozenClock
from tests.conftest import make_config

SLOTS = ["2026-11-02T09:00", "2026-11-09T09:00", "2026-11-16T09:00"]


class RecordingSurface:
    """The review channel: records posts and updates, answers at once."""

    def __init__(self) -> None:
        self.posts: list[str] = []
        self.updates: list[tuple[str, str, int]] = []

    def post_review(self, item: ReviewItem) -> MessageRef:
        self.posts.append(item.draft_key)
        return MessageRef("C0REVIEW", f"{len(self.posts)}.000100")

    def find_review(self, draft_key: str) -> MessageRef | None:
        return None

    def update_review(self, ref: MessageRef, item: ReviewItem) -> None:
        self.updates.append((item.draft_key, item.state, item.revision))

    def announce(self, notice: BackpressureNotice) -> MessageRef:
        return MessageRef("C0REVIEW", "9.000100")


class OneLineDrafter:
    def draft(self, request: DraftRequest) -> ModelReply:
        return ModelReply("A draft.", request.model, None, "end_turn", 10, 20, 0, 0)


def _drafts(store: Store, clock: FrozenClock) -> list[str]:
    config = make_config(pending_limit=10)
    recipe = config.recipes["weekly-update"]
    drafting = DraftingService(store, OneLineDrafter(), clock=clock, worker="w1")
    keys = []
    for wall in SLOTS:
        slot = slot_at_wall(recipe, datetime.fromisoformat(wall))
        result = drafting.draft_slot(recipe, slot, manual=True)
        assert result.key is not None
        keys.append(result.key)
    return keys


def _outbox(store: Store, clock: FrozenClock, surface: RecordingSurface) -> ReviewOutbox:
    ledger = EffectLedger(store, clock, "bot:1")
    return ReviewOutbox(store, ledger, surface, channel="C0REVIEW", call_lease=timedelta(1))


def _rows(store: Store) -> tuple[int, int]:
    with store.read() as session:
        effects = session.exec(select(sa.func.count()).select_from(EffectRow)).one()
        events = session.exec(select(sa.func.count()).select_from(EventRow)).one()
    return effects, events


def test_each_decision_and_edit_reaches_its_message_once(store: Store) -> None:
    clock, surface = FrozenClock(), RecordingSurface()
    config = make_config(pending_limit=10)
    rejected, approved, edited = _drafts(store, clock)
    outbox = _outbox(store, clock, surface)
    assert outbox.post_ready_drafts() == 3
    assert outbox.post_ready_drafts() == 0
    assert outbox.sync_messages() == 0  # posted as they are: nothing behind

    for key, verdict in ((rejected, Verdict.REJECTED), (approved, Verdict.APPROVED)):
        answer = decide(
            store, config, clock, draft_key=key, revision=1, verdict=verdict, user="U1",
            permitted=True,
        )  # fmt: skip
        assert answer.accepted
    assert edit(
        store, config, clock, draft_key=edited, revision=1, text="Better.", user="U1",
        permitted=True,
    ).accepted  # fmt: skip

    assert outbox.sync_messages() == 3
    before = _rows(store)
    assert outbox.sync_messages() == 0
    assert outbox.post_ready_drafts() == 0
    assert _rows(store) == before  # a pass with nothing pending writes nothing
    assert sorted(surface.updates) == sorted(
        [(rejected, "rejected", 1), (approved, "approved", 1), (edited, "ready", 2)]
    )
    assert surface.posts == [rejected, approved, edited]


def test_a_message_another_replica_updated_is_not_updated_again(store: Store) -> None:
    clock = FrozenClock()
    config = make_config(pending_limit=10)
    key = _drafts(store, clock)[0]
    first, second = RecordingSurface(), RecordingSurface()
    _outbox(store, clock, first).post_ready_drafts()
    decide(
        store, config, clock, draft_key=key, revision=1, verdict=Verdict.REJECTED, user="U1",
        permitted=True,
    )  # fmt: skip
    _outbox(store, clock, first).sync_messages()
    assert first.updates == [(key, "rejected", 1)]
    with store.transaction() as session:  # as if it stopped before recording what it showed
        session.execute(
            sa.update(DraftRow).where(col(DraftRow.key) == key).values(shown_state="ready")
        )

    assert _outbox(store, clock, second).sync_messages() == 0
    assert second.updates == []
    with store.read() as session:
        draft = session.exec(select(DraftRow).where(col(DraftRow.key) == key)).one()
    assert (draft.shown_state, draft.shown_revision) == ("rejected", 1)


def test_upgrading_marks_decisions_still_to_show(store: Store) -> None:
    """The migration reads the receipts: a decision whose update is on record is
    shown; one whose update is not is brought up to date by the next pass, once."""
    clock, surface = FrozenClock(), RecordingSurface()
    config = make_config(pending_limit=10)
    shown, not_shown, waiting = _drafts(store, clock)
    outbox = _outbox(store, clock, surface)
    outbox.post_ready_drafts()
    for key in (shown, not_shown):
        decide(
            store, config, clock, draft_key=key, revision=1, verdict=Verdict.REJECTED,
            user="U1", permitted=True,
        )  # fmt: skip
    outbox.sync_messages()
    with store.transaction() as session:  # the update of `not_shown` never happened
        session.execute(
            sa.delete(EffectRow).where(col(EffectRow.key).contains(f"{not_shown}|review-"))
        )
    surface.updates.clear()

    config_alembic = store._alembic_config()
    with store.engine.begin() as connection:
        config_alembic.attributes["connection"] = connection
        command.downgrade(config_alembic, "0003")
    store.upgrade()

    assert outbox.sync_messages() == 1
    assert surface.updates == [(not_shown, "rejected", 1)]
    assert outbox.sync_messages() == 0
    assert outbox.post_ready_drafts() == 0  # `waiting` was posted: the receipt says so
    with store.read() as session:
        marks = {
            d.key: (d.shown_state, d.shown_revision) for d in session.exec(select(DraftRow)).all()
        }
    assert marks == {shown: ("rejected", 1), not_shown: ("rejected", 1), waiting: ("ready", 1)}


class FirstUpdateWaits(RecordingSurface):
    """The first rewrite waits (a 429's Retry-After) until released; the rest answer."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting, self.release = threading.Event(), threading.Event()

    def update_review(self, ref: MessageRef, item: ReviewItem) -> None:
        if not self.waiting.is_set():
            self.waiting.set()
            self.release.wait(10)
        super().update_review(ref, item)


def test_a_rewrite_that_waited_out_a_429_never_leaves_the_message_behind(store: Store) -> None:
    """An edit's rewrite waits; meanwhile the draft is approved. The
    approval's rewrite does not overtake it (one rewrite per message at a time), and the
    next pass shows the approval: the message ends on the draft's last state."""
    clock, surface = FrozenClock(), FirstUpdateWaits()
    config = make_config(pending_limit=10)
    key = _drafts(store, clock)[0]
    outbox = _outbox(store, clock, surface)
    outbox.post_ready_drafts()
    assert edit(
        store, config, clock, draft_key=key, revision=1, text="Better.", user="U1",
        permitted=True,
    ).accepted  # fmt: skip
    rewriting = threading.Thread(target=outbox.sync_messages)
    rewriting.start()
    assert surface.waiting.wait(10)

    answer = decide(
        store, config, clock, draft_key=key, revision=2, verdict=Verdict.APPROVED, user="U1",
        permitted=True,
    )  # fmt: skip
    assert answer.accepted and answer.item is not None
    outbox.show_now(answer.item)  # while the edit's rewrite still waits
    surface.release.set()
    rewriting.join(10)
    outbox.sync_messages()

    assert surface.updates[-1] == (key, "approved", 2)
    with store.read() as session:
        shown = session.exec(select(DraftRow.shown_state).where(col(DraftRow.key) == key)).one()
    assert shown == "approved"
    assert outbox.sync_messages() == 0


def test_a_review_post_still_on_the_wire_is_not_taken_over(store: Store) -> None:
    """Its holder's lease lapsed mid-call, but the call may still land for `on_wire`
    (the call's own limit): nobody judges it uncertain, or posts it, before then."""
    clock, surface = FrozenClock(), RecordingSurface()
    [key, *_] = _drafts(store, clock)
    wire = timedelta(seconds=30)
    holder = ReviewOutbox(
        store, EffectLedger(store, clock, "bot:1"), surface, channel="C0REVIEW",
        call_lease=timedelta(seconds=120), on_wire=wire,
    )  # fmt: skip
    [item, *_] = [i for i in holder._unposted() if i.draft_key == key]
    holder.ledger.begin(holder._review_spec(item))  # the holder is mid-call
    clock.advance(timedelta(seconds=121))  # its lease lapsed, its post may still land

    other = ReviewOutbox(
        store, EffectLedger(store, clock, "bot:2"), surface, channel="C0REVIEW",
        call_lease=timedelta(seconds=120), on_wire=wire,
    )  # fmt: skip
    assert other.post_one(item) is None
    with store.read() as session:
        receipt = session.get(EffectRow, review_effect_key(key))
        assert receipt is not None and receipt.state == EffectState.IN_FLIGHT
    assert surface.posts == []

    clock.advance(wire)  # past the call's limit: now it is looked for, then posted once
    assert other.post_one(item) is not None
    assert surface.posts == [key]
