"""Reminders (docs/design.md §35): a draft still waiting is announced again in
its review message's thread once per `remind_after`, pinging the approvers (groups as
groups); `escalate_after` pings `alert_mentions` once; nothing after a decision; never
twice for one interval across replicas. On both backends, over the fake Slack Web API;
races forced at the point between the pass's read and its post."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import col

from bot.digest_text import digest_text
from bot.slack_surface import SlackReviewSurface
from core.drafting.service import DraftingService
from core.failpoints import hook
from core.models import DraftRow
from core.operations.digest import build_digest
from core.review.facts import AnnotatedReviewSurface
from core.review.outbox import ReviewOutbox
from core.review.queue import edit, expire_overdue_drafts
from core.review.reminders import remind_waiting
from core.setup.config import parse_config
from core.slots.schedule import slot_at_wall
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text
from tests.harness.slack_harness import PEOPLE
from tests.harness.worlds import KEY, REVIEW, SLOT, MakeWorld, World

REMIND = 'remind_after = "4h"\nescalate_after = "10h"\ndraft_ahead = "2d"'
APPROVERS = ("<@U0EDITOR>", "<!subteam^S0EDITORS>")
ON_CALL = "<@U0ONCALL>"


def waiting(worlds: MakeWorld, db_url: str, defaults: str = REMIND) -> World:
    """A draft posted for review two days before its slot, the clock at that moment."""
    world = worlds(db_url, defaults=defaults)
    world.clock.set(datetime.fromisoformat(SLOT).replace(tzinfo=UTC) - timedelta(days=2))
    world.draft()
    surface = AnnotatedReviewSurface(
        SlackReviewSurface(world.channels, REVIEW), world.store, world.config, world.clock
    )
    ledger = EffectLedger(world.store, world.clock, "outbox")
    ReviewOutbox(
        world.store, ledger, surface, channel=REVIEW, call_lease=timedelta(1)
    ).post_ready_drafts()
    return world


def remind(world: World, worker: str = "w1", store: Store | None = None) -> int:
    store = store or world.store
    ledger = EffectLedger(store, world.clock, worker)
    surface = SlackReviewSurface(world.channels, REVIEW)
    return remind_waiting(store, world.config, world.clock, ledger, surface)


def review_ts(world: World) -> str:
    [message] = [m for m in world.slack.messages(REVIEW) if m.get("metadata")]
    return str(message["ts"])


def replies(world: World) -> list[dict[str, Any]]:
    return [m for m in world.slack.messages(REVIEW) if m.get("thread_ts")]


def after(world: World, hours: float) -> None:
    world.clock.advance(timedelta(hours=hours))


def test_a_waiting_draft_is_reminded_once_an_interval_in_its_thread_pinging_approvers(
    worlds: MakeWorld, db_url: str
) -> None:
    world = waiting(worlds, db_url)
    after(world, 3.9)
    assert remind(world) == 0
    after(world, 0.2)
    assert (remind(world), remind(world)) == (1, 0)
    after(world, 4)
    assert remind(world) == 1

    sent = replies(world)
    assert [m["thread_ts"] for m in sent] == [review_ts(world)] * 2
    assert all(all(who in m["text"] for who in APPROVERS) for m in sent)
    assert all(ON_CALL not in m["text"] for m in sent)


def test_escalation_pings_alert_mentions_once(worlds: MakeWorld, db_url: str) -> None:
    world = waiting(worlds, db_url)
    after(world, 10.1)
    assert remind(world) == 2  # the second interval's reminder, and the escalation
    after(world, 3)
    assert remind(world) == 1  # the third interval's: no second escalation

    escalations = [m for m in replies(world) if ON_CALL in m["text"]]
    assert len(escalations) == 1 and escalations[0]["thread_ts"] == review_ts(world)


def test_nothing_is_reminded_after_a_decision(worlds: MakeWorld, db_url: str) -> None:
    world = waiting(worlds, db_url)
    after(world, 3)
    assert world.approve().accepted
    after(world, 12)
    assert remind(world) == 0
    assert replies(world) == []


def test_a_recipe_without_remind_after_is_never_reminded(worlds: MakeWorld, db_url: str) -> None:
    world = waiting(worlds, db_url, defaults='draft_ahead = "2d"')
    after(world, 30)
    assert remind(world) == 0 and replies(world) == []


def test_a_decision_between_the_read_and_the_post_means_no_reminder(
    worlds: MakeWorld, db_url: str
) -> None:
    world = waiting(worlds, db_url)
    after(world, 4.1)

    with hook("reminders_due_read", lambda: world.approve()):
        assert remind(world) == 0

    assert replies(world) == []


def test_an_edit_between_the_read_and_the_post_means_no_reminder_of_the_old_revision(
    worlds: MakeWorld, db_url: str
) -> None:
    """The draft still waits, but on a newer revision: the reminder the pass read is owed by
    a revision nobody is asked about any more (its last look requires it still current)."""
    world = waiting(worlds, db_url)
    after(world, 4.1)

    def edited_meanwhile() -> None:
        saved = edit(
            world.store, world.config, world.clock, draft_key=KEY, revision=1,
            text="A reviewer's words.", user="U0EDITOR", permitted=True,
        )  # fmt: skip
        assert saved.accepted

    with hook("reminders_due_read", edited_meanwhile):
        assert remind(world) == 0

    assert replies(world) == []
    assert world.draft_row().revision == 2


def test_two_replicas_in_the_same_interval_post_one_reminder(
    worlds: MakeWorld, db_url: str
) -> None:
    world = waiting(worlds, db_url)
    after(world, 4.1)
    both_read = threading.Barrier(2, timeout=30)
    other = Store(db_url)
    counts: dict[str, int] = {}

    def replica(worker: str, store: Store) -> None:
        counts[worker] = remind(world, worker, store)

    with hook("reminders_due_read", both_read.wait):  # each has read: nothing posted yet
        threads = [
            threading.Thread(target=replica, args=("w1", world.store)),
            threading.Thread(target=replica, args=("w2", other)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    other.dispose()

    assert sorted(counts.values()) == [0, 1]
    assert len(replies(world)) == 1
    assert KEY in str(world.effect(f"{KEY}|remind:1:1"))


def test_a_replica_that_read_before_another_posted_counts_no_reminder_of_its_own(
    worlds: MakeWorld, db_url: str
) -> None:
    world = waiting(worlds, db_url)
    after(world, 4.1)
    other = Store(db_url)
    w2_read, w1_done = threading.Event(), threading.Event()
    counts: dict[str, int] = {}

    def w2() -> None:
        counts["w2"] = remind(world, "w2", other)

    def pause_w2() -> None:  # w2 has read the reminder as due; w1 posts it meanwhile
        if threading.current_thread() is late:
            w2_read.set()
            w1_done.wait(timeout=30)

    late = threading.Thread(target=w2)
    with hook("reminders_due_read", pause_w2):
        late.start()
        assert w2_read.wait(timeout=30)
        counts["w1"] = remind(world, "w1")
        w1_done.set()
        late.join(timeout=60)
    other.dispose()

    assert counts == {"w1": 1, "w2": 0}  # w2 found it posted: not a reminder of its own
    assert len(replies(world)) == 1


def test_the_digest_counts_drafts_that_expired_with_nobody_clicking(store: Store) -> None:
    cfg = parse_config(
        config_text(pending_limit=10).replace("[defaults]\n", '[defaults]\nreview_window = "2h"\n')
    )
    clock = FrozenClock(datetime(2026, 11, 2, 9, 5, tzinfo=UTC))
    recipe = cfg.recipes["weekly-update"]
    drafting = DraftingService(store, InstantDrafter(), clock=clock, worker="w1")
    keys = [
        drafting.draft_slot(recipe, slot_at_wall(recipe, datetime.fromisoformat(wall))).key
        for wall in ("2026-11-02T09:00", "2026-10-26T09:00")
    ]
    unread, edited = keys
    assert unread is not None and edited is not None
    said = edit(
        store,
        cfg,
        clock,
        draft_key=edited,
        revision=1,
        text="Edited.",
        user="U0ANA",
        permitted=True,
    )
    assert said.accepted
    clock.advance(timedelta(hours=3))
    assert len(expire_overdue_drafts(store, cfg, clock)) == 2

    digest = build_digest(store, cfg, clock.now())
    assert digest.expired_unread == {"weekly-update": 1}
    assert "Expired with nobody's click (24h): *weekly-update* 1" in digest_text(digest)


def test_the_bot_runs_the_reminders_pass_and_replies_in_the_review_thread(
    start_bot: Any, db_url: str
) -> None:
    h = start_bot(db_url, slack=PEOPLE, defaults='remind_after = "4h"')
    key, message = h.draft_and_post()
    with h.store.transaction() as session:  # it has waited four hours and a minute
        waited = h.bot.core.clock.now() - timedelta(hours=4, minutes=1)
        session.execute(sa.update(DraftRow).where(col(DraftRow.key) == key).values(ready_at=waited))

    h.bot.host.scheduler.get_job("reminders").func()

    [reply] = [m for m in h.slack.messages(REVIEW) if m.get("thread_ts")]
    assert reply["thread_ts"] == message["ts"]
    assert "<@U0EDITOR>" in reply["text"] and "<!subteam^S0EDITORS>" in reply["text"]


def test_a_reminder_says_its_wait_in_the_unit_that_fits() -> None:
    """A 20 s `remind_after` is said as seconds, not "0 minutes" (one rule for every
    duration a message shows a person: core.setup.durations.spoken_duration)."""
    from bot.slack_surface import reminder_text
    from core.ports import MessageRef, ReviewReminder

    def said(waiting: timedelta) -> str:
        thread = MessageRef(channel=REVIEW, ts="1.0")
        return reminder_text(ReviewReminder(thread, KEY, "weekly-update", 1, waiting, []))

    assert said(timedelta(seconds=20)).startswith("Still waiting for review after 20 seconds ")
    assert "after 1 minute " in said(timedelta(seconds=61))
    assert "after 1 hour 30 minutes " in said(timedelta(minutes=90))
    assert "after 4 hours " in said(timedelta(hours=4, seconds=59))
    assert "after 2 days 1 hour " in said(timedelta(days=2, hours=1))
