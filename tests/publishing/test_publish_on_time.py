"""Publish on time (docs/design.md §23): an approved draft waits for its slot and
goes out at it, once, by whichever replica is up; approvals stay fresh from the slot;
a slot that passes unapproved, or approved with nothing up to publish it, never goes out
late beyond publish_late.

In process over real HTTP to the fake webhook (tests/harness/worlds.py), with a frozen clock.
Counted: POSTs at the fake, rows in the database. Both backends.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from bot.blocks import draft_message
from bot.digest_text import digest_text
from core.failpoints import Failpoint, hook
from core.operations.digest import build_digest
from core.policies import ExpiryReason, FailReason, PublishOutcome, Refusal
from core.publishing.missed_slots import expire_missed_slots
from core.publishing.queue import publishable
from core.review.queue import edit, load_item
from core.review.unapproval import unapprove
from core.setup.config import parse_config
from core.states import DraftState, RunState
from core.store.engine import Store
from core.testing import FrozenClock, SkewedClock
from tests.harness.worlds import KEY, RECIPE, RUN, MakeWorld, World, galley_config, webhook_table

SLOT = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # weekly-update@2026-11-23T09:00, London = UTC
AHEAD = 'draft_ahead = "2d"\napproval_ttl = "24h"\npublish_late = "1h"'


def ahead_world(worlds: MakeWorld, db_url: str, approved_at: datetime) -> World:
    world = worlds(db_url, defaults=AHEAD)
    world.clock.set(approved_at)
    world.approved()
    return world


def test_nothing_is_published_before_the_slot_and_once_at_it(
    worlds: MakeWorld, db_url: str
) -> None:
    world = ahead_world(worlds, db_url, SLOT - timedelta(days=1))
    service = world.service()
    assert world.run_row().publish_at == SLOT

    assert service.publish_run(RUN).outcome == PublishOutcome.NOT_READY  # the click's follow-up
    world.clock.set(SLOT - timedelta(seconds=1))
    assert service.publish_pending() == []
    assert world.posts() == 0 and world.run_row().state == RunState.APPROVED

    world.clock.set(SLOT)
    [result] = service.publish_pending()
    assert result.outcome == PublishOutcome.PUBLISHED
    world.clock.set(SLOT + timedelta(minutes=5))
    assert service.publish_pending() == []
    assert world.posts() == 1
    assert (world.run_row().state, world.draft_row().state) == (
        RunState.SUCCEEDED,
        DraftState.PUBLISHED,
    )


def test_two_replicas_at_the_slot_instant_make_one_publication(
    worlds: MakeWorld, db_url: str
) -> None:
    world = ahead_world(worlds, db_url, SLOT - timedelta(hours=3))
    world.clock.set(SLOT)
    stores = [Store(db_url), Store(db_url)]  # two processes: two engines on one database
    replicas = [world.service(f"replica-{n}", store=s) for n, s in enumerate(stores)]
    together = threading.Barrier(2)
    errors: list[BaseException] = []

    def publish(n: int) -> None:
        try:
            together.wait(10)
            replicas[n].publish_pending()
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for store in stores:
        store.dispose()
    assert errors == []
    assert world.posts() == 1
    assert len(world.hook.publications) == 1
    assert world.run_row().state == RunState.SUCCEEDED


def test_an_approval_given_days_ahead_is_fresh_at_its_slot(worlds: MakeWorld, db_url: str) -> None:
    """approval_ttl (24h) counts from the later of the approval and the slot."""
    world = ahead_world(worlds, db_url, SLOT - timedelta(days=2))
    world.clock.set(SLOT + timedelta(minutes=1))
    [result] = world.service().publish_pending()
    assert result.outcome == PublishOutcome.PUBLISHED
    assert world.posts() == 1


def test_past_the_slot_plus_approval_ttl_the_draft_goes_back_to_review(
    worlds: MakeWorld, db_url: str
) -> None:
    world = ahead_world(worlds, db_url, SLOT - timedelta(hours=2))
    world.clock.set(SLOT + timedelta(hours=24, minutes=1))
    [result] = world.service().publish_pending()
    assert result.outcome == PublishOutcome.SENT_BACK
    assert world.posts() == 0
    assert (world.run_row().state, world.draft_row().state) == (
        RunState.AWAITING_REVIEW,
        DraftState.READY,
    )


def test_approved_within_publish_late_after_the_slot_it_publishes_at_once(
    worlds: MakeWorld, db_url: str
) -> None:
    world = worlds(db_url, defaults=AHEAD)
    world.clock.set(SLOT - timedelta(hours=1))
    key = world.draft()
    world.clock.set(SLOT + timedelta(minutes=40))
    assert world.approve(key).accepted
    assert world.run_row().publish_at == SLOT + timedelta(minutes=40)
    [result] = world.service().publish_pending()
    assert result.outcome == PublishOutcome.PUBLISHED
    assert world.posts() == 1


def test_an_approved_draft_found_past_publish_late_is_not_published_and_people_are_told(
    worlds: MakeWorld, db_url: str
) -> None:
    """The bot was down from before the slot until past slot + publish_late (within
    approval_ttl): it fails `missed_slot`, one alert with Retry / Cancel; a person's
    Retry publishes it once."""
    world = ahead_world(worlds, db_url, SLOT - timedelta(hours=5))
    world.clock.set(SLOT + timedelta(hours=1, minutes=1))
    services = world.services()
    [result] = services.publishing.publish_pending()
    assert result.outcome == PublishOutcome.FAILED
    assert world.posts() == 0
    run = world.run_row()
    assert (run.state, run.reason) == (RunState.FAILED, FailReason.MISSED_SLOT)
    assert world.draft_row().state == DraftState.APPROVED
    assert services.alerts.sweep() == 0  # told once, by the pass that found it
    [alert] = world.alert_messages()
    labels = [
        e["text"]["text"] for b in alert["blocks"] if b["type"] == "actions" for e in b["elements"]
    ]
    assert labels == ["Retry", "Cancel"]
    digest = build_digest(world.store, world.config, world.clock.now())
    assert digest.missed == [RUN]
    assert f"missed their time (24h): `{RUN}`" in digest_text(digest)

    world.resolver().retry(RUN, actor="U0ADMIN")
    world.service().publish_pending()
    assert world.posts() == 1
    assert world.run_row().state == RunState.SUCCEEDED


def test_a_draft_unapproved_at_slot_plus_publish_late_expires_missed_slot(
    worlds: MakeWorld, db_url: str
) -> None:
    world = worlds(db_url, defaults=AHEAD)
    world.clock.set(SLOT - timedelta(days=1))
    world.draft()
    world.clock.set(SLOT + timedelta(hours=1))  # the last instant of the grace
    assert expire_missed_slots(world.store, world.config, world.clock) == []
    world.clock.set(SLOT + timedelta(hours=1, seconds=1))
    [missed] = expire_missed_slots(world.store, world.config, world.clock)

    assert missed.key == KEY
    run = world.run_row()
    assert (run.state, run.reason) == (RunState.EXPIRED, ExpiryReason.MISSED_SLOT)
    item = load_item(world.store, KEY)
    assert item is not None and item.state == DraftState.EXPIRED and item.missed_slot
    _, blocks = draft_message(item)
    shown = " ".join(str(b) for b in blocks)
    assert "missed its slot" in shown and "Mon 23 Nov 09:00 (Europe/London)" in shown
    assert world.posts() == 0


@pytest.mark.fresh_database  # a plan depends on dead rows and statistics an earlier test left
def test_the_publish_queue_reads_approved_runs_by_their_time_through_an_index(
    store: Store,
) -> None:
    """Approved runs waiting for their slot cost a pass nothing until it comes: the due
    ones are read through ix_runs_publish_due (both backends' plans say so)."""
    seen: list[tuple[str, Any]] = []

    def record(_c: object, _cur: object, sql: str, params: Any, *_rest: object) -> None:
        if "publish_at <=" in sql:
            seen.append((sql, params))

    sa.event.listen(store.engine, "before_cursor_execute", record)
    try:
        with store.read() as session:
            publishable(session, SLOT)
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", record)
    [(sql, params)] = seen
    with store.engine.begin() as connection:
        if store.dialect == "sqlite":
            rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
            plan = " ".join(str(row[3]) for row in rows)
        else:
            connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
            rows = connection.exec_driver_sql(f"EXPLAIN {sql}", params)
            plan = " ".join(str(row[0]) for row in rows)
    assert "ix_runs_publish_due" in plan, plan


# --- the click refuses what could never publish; one clock ---------------------------


def test_an_approval_after_slot_plus_publish_late_is_refused_at_the_click(
    worlds: MakeWorld, db_url: str
) -> None:
    world = worlds(db_url, defaults=AHEAD)
    world.clock.set(SLOT - timedelta(days=1))
    key = world.draft()
    world.clock.set(SLOT + timedelta(hours=1, minutes=1))  # past publish_late (1h)

    answer = world.approve(key)

    assert not answer.accepted and answer.refusal == Refusal.MISSED_SLOT
    assert answer.message.startswith("Too late: Not approved by its publication time")
    assert world.draft_row().state == DraftState.EXPIRED
    run = world.run_row()
    assert (run.state, run.reason) == (RunState.EXPIRED, ExpiryReason.MISSED_SLOT)
    assert world.service().publish_pending() == [] and world.posts() == 0


def test_a_replica_eleven_minutes_fast_judges_due_stale_and_late_by_the_databases_clock(
    worlds: MakeWorld, db_url: str
) -> None:
    """Drafting ahead, a slot five minutes ago (by the database) is due and within
    publish_late (10m); the replica's own clock would call it sixteen minutes late."""
    world = worlds(db_url, defaults='draft_ahead = "1h"\npublish_late = "10m"')
    world.config = parse_config(
        galley_config(
            webhook_table(world.hook), defaults='draft_ahead = "1h"\npublish_late = "10m"'
        ).replace('schedule = "0 9 * * mon"', 'schedule = "* * * * *"')
    )
    world.clock = SkewedClock(timedelta(minutes=11))  # type: ignore[assignment]
    world._open()
    database_now = datetime.now(UTC).replace(second=0, microsecond=0)
    slot = (database_now - timedelta(minutes=5)).astimezone(world.recipe.zone)
    drafted = world.galley.draft(RECIPE, slot.strftime("%Y-%m-%dT%H:%M"))
    assert drafted.key is not None, drafted

    assert world.approve(drafted.key).accepted  # not "too late" by the replica's clock
    result = world.service().publish_run(drafted.run)

    assert result.outcome == PublishOutcome.PUBLISHED, result
    assert world.posts() == 1
    assert world.run_row(drafted.run).state == RunState.SUCCEEDED


def test_a_draft_approved_between_the_missed_slot_read_and_its_write_is_not_expired(
    worlds: MakeWorld, db_url: str
) -> None:
    """The pass read the draft as ready and missed; a late approval (still within its
    own click's judgement) lands before the pass writes: the locked re-read sees it."""
    world = worlds(db_url, defaults=AHEAD)
    world.clock.set(SLOT - timedelta(days=1))
    key = world.draft()
    world.clock.set(SLOT + timedelta(minutes=30))  # within publish_late for the click
    pass_clock = FrozenClock(SLOT + timedelta(hours=2))  # the pass judges it missed

    def approve_meanwhile() -> None:
        assert world.approve(key).accepted

    with hook(Failpoint.MISSED_AFTER_READ, approve_meanwhile):
        expired = expire_missed_slots(world.store, world.config, pass_clock)

    assert expired == []
    assert world.draft_row().state == DraftState.APPROVED
    assert world.run_row().state == RunState.APPROVED


# --- who wrote a revision's text is kept whatever bumps its number ---------------------

EDITOR, OTHER = "U0ANA", "U0BEN"


def edited_and_approved(worlds: MakeWorld, db_url: str, timing: str = AHEAD) -> World:
    """ANA edited the draft (revision 2), BEN approved it; editors may not approve."""
    world = worlds(db_url, defaults=timing + "\neditor_may_approve = false")
    world.clock.set(SLOT - timedelta(days=1))
    key = world.draft()
    saved = edit(
        world.store, world.config, world.clock, draft_key=key, revision=1,
        text="ANA's words.", user=EDITOR, permitted=True,
    )  # fmt: skip
    assert saved.accepted
    refused = world.approve(key, revision=2, user=EDITOR)
    assert refused.refusal == Refusal.EDITOR_MAY_NOT_APPROVE
    assert world.approve(key, revision=2, user=OTHER).accepted
    return world


def test_the_editor_may_not_approve_their_text_after_an_unapprove(
    worlds: MakeWorld, db_url: str
) -> None:
    world = edited_and_approved(worlds, db_url)
    taken_back = unapprove(
        world.store, world.config, world.clock, draft_key=KEY, revision=2, user=OTHER,
        permitted=True,
    )  # fmt: skip
    assert taken_back.accepted and world.draft_row().revision == 3

    again = world.approve(KEY, revision=3, user=EDITOR)  # still ANA's text

    assert (again.accepted, again.refusal) == (False, Refusal.EDITOR_MAY_NOT_APPROVE)
    assert world.approve(KEY, revision=3, user=OTHER).accepted


def test_the_editor_may_not_approve_their_text_after_a_stale_send_back(
    worlds: MakeWorld, db_url: str
) -> None:
    world = edited_and_approved(worlds, db_url, timing='approval_ttl = "24h"')  # not ahead
    world.clock.advance(timedelta(hours=24, minutes=1))  # nothing published it meanwhile
    [result] = world.service().publish_pending()
    assert result.outcome == PublishOutcome.SENT_BACK and world.draft_row().revision == 3

    again = world.approve(KEY, revision=3, user=EDITOR)

    assert (again.accepted, again.refusal) == (False, Refusal.EDITOR_MAY_NOT_APPROVE)
