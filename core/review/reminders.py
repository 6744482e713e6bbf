"""Reminders (docs/design.md §35): a draft still waiting for review is announced again in
its review message's thread once per `remind_after`, pinging the approvers who have not
approved yet (groups as groups); once it has waited `escalate_after`, `alert_mentions`
are pinged, once. Each is an effect with its own key (draft, revision, interval), so
replicas in the same interval post it once; the last look before the call, with the
draft locked, must find that revision still waiting, so nothing is posted after a
decision. Never decides, expires or changes a draft.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from core.failpoints import Failpoint, failpoint
from core.identity import review_effect_key, review_escalation_key, review_reminder_key
from core.models import DraftRow, EffectRow
from core.policies import EffectOutcome, EffectStep
from core.ports import Clock, MessageRef, ReviewReminder, ReviewThread
from core.review.approvals import approval_progress
from core.setup.config import Config, Recipe
from core.states import DraftState, EffectState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.leases import lease_now
from core.store.receipts import EffectSpec, MayAct, Proof
from core.store.rows import lock_draft

REMIND_BATCH = 200  # waiting drafts one pass reads, oldest first
REMINDER_LEASE = timedelta(minutes=5)


@dataclass(frozen=True)
class DueReminder:
    """One reminder (or escalation) a waiting revision is owed now."""

    key: str
    draft_key: str
    run_id: str
    recipe: str
    revision: int
    waiting: timedelta
    escalated: bool


def remind_waiting(
    store: Store, config: Config, clock: Clock, ledger: EffectLedger, thread: ReviewThread
) -> int:
    """The periodic pass: every reminder and escalation due now, posted once in its
    review message's thread; how many were posted."""
    reminding = [name for name, r in config.recipes.items() if r.remind_after or r.escalate_after]
    if not reminding:
        return 0
    with store.read() as session:  # ix_drafts_ready: the review queue, not the history
        now = lease_now(session, clock)  # the database's clock judges stored times
        waiting = session.exec(
            select(DraftRow)
            .where(col(DraftRow.state) == DraftState.READY, col(DraftRow.recipe).in_(reminding))
            .order_by(col(DraftRow.ready_at))
            .limit(REMIND_BATCH)
        ).all()
        due = [d for draft in waiting for d in _due(config.recipes[draft.recipe], draft, now)]
        told = _already_posted(session, [d.key for d in due])
    failpoint(Failpoint.REMINDERS_DUE_READ)  # tests: a second replica, or a decision, here
    return sum(_post_once(store, config, ledger, thread, d) for d in due if d.key not in told)


def _due(recipe: Recipe, draft: DraftRow, now: datetime) -> list[DueReminder]:
    """The reminder of the interval the draft's wait is in (none in the first), and the
    escalation once it has waited `escalate_after`."""
    if draft.ready_at is None:
        return []
    waiting = now - draft.ready_at
    due: list[DueReminder] = []
    interval = int(waiting / recipe.remind_after) if recipe.remind_after else 0
    if interval >= 1:
        key = review_reminder_key(draft.key, draft.revision, interval)
        due.append(_reminder(key, draft, waiting, escalated=False))
    if recipe.escalate_after is not None and waiting >= recipe.escalate_after:
        key = review_escalation_key(draft.key, draft.ready_at)
        due.append(_reminder(key, draft, waiting, escalated=True))
    return due


def _reminder(key: str, draft: DraftRow, waiting: timedelta, *, escalated: bool) -> DueReminder:
    return DueReminder(
        key, draft.key, draft.run_id, draft.recipe, draft.revision, waiting, escalated
    )


def _already_posted(session: Session, keys: list[str]) -> set[str]:
    """Of these keys, those posted or on their way (any receipt but a failed one): one read
    by primary key, so drafts reminded already cost one query."""
    if not keys:
        return set()
    rows = session.exec(
        select(EffectRow.key).where(
            col(EffectRow.key).in_(keys), col(EffectRow.state) != EffectState.FAILED
        )
    ).all()
    return set(rows)


def _post_once(
    store: Store, config: Config, ledger: EffectLedger, thread: ReviewThread, due: DueReminder
) -> bool:
    review = ledger.get(review_effect_key(due.draft_key))
    if review is None or review.state != EffectState.SUCCEEDED or not review.result:
        return False  # no review message yet: the outbox posts it first
    ref = MessageRef(channel=str(review.result["channel"]), ts=str(review.result["ts"]))
    spec = EffectSpec(
        due.key,
        draft_key=due.draft_key,
        step=EffectStep.REMINDER,
        payload={"draft": due.draft_key, "revision": due.revision},
        lease=REMINDER_LEASE,
        run_id=due.run_id,
    )

    def post() -> Proof:
        mentions = (
            list(config.slack.alert_mentions) if due.escalated else _approvers(store, config, due)
        )
        reminder = ReviewReminder(
            ref, due.draft_key, due.recipe, due.revision, due.waiting, mentions, due.escalated
        )
        posted = thread.remind(reminder)
        return Proof(posted.ts, {"channel": posted.channel, "ts": posted.ts})

    may_act = _still_waiting(due.draft_key, due.revision)
    # posted by this pass: not one another replica posted first (DONE) or is posting
    return ledger.perform(spec, post, may_act=may_act).outcome == EffectOutcome.SENT


def _approvers(store: Store, config: Config, due: DueReminder) -> list[str]:
    """The approvers asked now: those listed who have not approved this revision."""
    with store.read() as session:
        draft = session.get(DraftRow, due.draft_key)
        return [] if draft is None else list(approval_progress(session, config, draft).may_still)


def _still_waiting(draft_key: str, revision: int) -> MayAct:
    """The last look before the call, the draft locked: still waiting on this revision.
    A decision, an edit or an expiry since the pass read it means no reminder."""

    def check(session: Session, now: datetime) -> str | None:
        draft = lock_draft(session, draft_key)
        if draft is None or draft.state != DraftState.READY:
            return f"no reminder: the draft is {draft.state if draft else 'gone'}"
        if draft.revision != revision:
            return f"no reminder: revision {draft.revision} replaced {revision}"
        return None

    return check
