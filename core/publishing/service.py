"""Publishing an approved draft exactly once (docs/design.md §7-§10).

Every publication is an effect with a receipt. The destination is asked before
publishing and before any retry of an uncertain attempt: found → record it, done;
clearly absent → publish once, under the same key; cannot tell → the run becomes
`uncertain` and people are asked. An approval older than `approval_ttl` when
publishing starts is not used: the draft goes back to review. The receipt's lease is
kept alive by heartbeat for as long as the call runs (429 waits included), so no other
pass takes a slow send for a dead one; a run cancelled before the send stops it.
Each target's send, step by step under its receipt, is `target_send.py`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from sqlmodel import Session

from core.errors import ConcurrentChange, GalleyError
from core.failpoints import Failpoint, failpoint
from core.identity import publish_effect_key
from core.models import DraftRow, RunRow
from core.policies import EffectOutcome, FailReason, PublishOutcome
from core.ports import Clock, Publication, Publisher
from core.publishing.lost_answers import look_up_due, lookup_grace
from core.publishing.missed_slots import miss_its_time
from core.publishing.orphans import OrphanSettler, note_outcome
from core.publishing.queue import PUBLISHABLE, OrphanedSend, orphaned_sends, publishable
from core.publishing.results import PublishResult
from core.publishing.target_send import NOT_SENT_STALE, TargetPublisher, send_back
from core.publishing.targets import (
    PublisherFor,
    TargetDone,
    Verdict,
    publishers_of,
    renamed_target,
    verdict,
)
from core.publishing.threads import publish_version, refused_for_good, shaped_for
from core.setup.config import Config, Recipe
from core.setup.durations import format_duration
from core.slots.publish_time import approval_stale, not_yet
from core.states import DraftState, RunState, run_may_move
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.leases import PUBLISHER, lease_now
from core.store.receipts import Performed
from core.store.rows import lock_draft_of, lock_run, required, run_row
from core.store.transitions import move_draft, move_run

log = logging.getLogger(__name__)

Subject = TypeVar("Subject")


class PublishingService:
    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock,
        ledger: EffectLedger,
        publisher_for: PublisherFor,
        alert: Callable[[str], object] | None = None,
    ) -> None:
        """`alert(run_id)` is called when people must look: uncertain, or refused auth."""
        self.store, self.config, self.clock, self.ledger = store, config, clock, ledger
        self.publisher_for = publisher_for
        self.alert = alert or (lambda run_id: None)

    def publishable_runs(self) -> list[str]:
        """One batch of approved, publishing and uncertain runs that have a destination."""
        with self.store.read() as session:  # the database's clock: replicas' clocks drift
            rows = publishable(session, lease_now(session, self.clock))
        return [run_id for run_id, recipe in rows if self._target(recipe) is not None]

    def publish_pending(self) -> list[PublishResult]:
        """The reconciler's pass: every approved, publishing or uncertain run, once, then
        the sends whose run stopped publishing them before their outcome was known. One
        run's error is logged and does not hold up the others."""
        results = [self._logged(self.publish_run, run) for run in self.publishable_runs()]
        with self.store.read() as session:
            orphans = orphaned_sends(session, lease_now(session, self.clock))
        results += [self._logged(self.settle_orphan, send) for send in orphans]
        return [result for result in results if result is not None]

    def _logged(
        self, step: Callable[[Subject], PublishResult | None], subject: Subject
    ) -> PublishResult | None:
        try:
            return step(subject)
        except ConcurrentChange as exc:  # a person or another worker settled it first
            log.warning("publishing %s: %s", subject, exc)
        except GalleyError:
            log.exception("publishing %s failed; the next pass tries again", subject)
        return None

    def publish_run(self, run_id: str) -> PublishResult:
        """Each target of the run's recipe once, in order, each its own effect: one that
        succeeded before is answered from its receipt and never sent again."""
        started = self._start(run_id)
        if isinstance(started, PublishResult):
            if started.outcome == PublishOutcome.FAILED:  # missed its time: people are told
                self.alert(run_id)
            return started
        recipe, approved = started
        failpoint(Failpoint.AFTER_PUBLISHING_COMMIT)
        done: list[TargetDone] = []
        publishers = publishers_of(self.publisher_for, recipe)
        for publisher in publishers:
            key = publish_effect_key(approved.draft_key, publisher.target)
            publication = shaped_for(replace(approved, effect_key=key), publisher.target)
            renamed = self._renamed(publication, publisher, [p.target for p in publishers])
            target = TargetPublisher(
                self.store, self.config, self.clock, self.ledger, recipe, publisher, run_id
            )
            performed = renamed or publish_version(publisher, publication, target.publish_one)
            done.append(TargetDone(publisher.target, performed))
            if performed.outcome == EffectOutcome.REFUSED:
                break  # cancelled, or sent back to review: no other target may go either
        return self._after(run_id, verdict(done, stale=NOT_SENT_STALE))

    def _renamed(
        self, publication: Publication, publisher: Publisher, current: list[str]
    ) -> Performed | None:
        """A target whose id changed in the config after this draft was sent under the old
        one is not sent again under the new: the run fails, saying so, and people decide."""
        with self.store.read() as session:
            old = renamed_target(session, publication.draft_key, publisher.target, current)
        if old is None:
            return None
        said = (
            f"{publisher.target} is not sent: this draft went to {old} before the config "
            "changed, and they may be one account; check it, then cancel or restore the target"
        )
        return refused_for_good(said)

    def _after(self, run_id: str, found: Verdict) -> PublishResult:
        """What the targets' outcomes mean for the run."""
        match found.outcome:
            case PublishOutcome.PUBLISHED:
                return self._finish(run_id, found.external_id or "")
            case PublishOutcome.FAILED:
                return self._refused(run_id, found)
            case PublishOutcome.UNCERTAIN:
                return self._uncertain(run_id, found.detail or "outcome unknown")
        return PublishResult(found.outcome, run_id, found.detail)

    def _refused(self, run_id: str, found: Verdict) -> PublishResult:
        """A destination refused the publication itself: the run fails (a person retries
        it once the cause is fixed); refused credentials (401/403) stop and tell people."""
        reason = FailReason.PUBLISH_AUTH if found.auth else FailReason.PUBLISH_REJECTED
        detail = found.detail or str(found.refusal)
        self._move(run_id, RunState.FAILED, reason=reason, detail=detail)
        if found.auth:
            self.alert(run_id)
        return PublishResult(PublishOutcome.FAILED, run_id, detail)

    def settle_orphan(self, send: OrphanedSend) -> PublishResult | None:
        """Ask the destination about a send its run no longer publishes (`orphans.py`)."""
        recipe = self.config.recipes.get(send.recipe)
        publishers = [] if recipe is None else publishers_of(self.publisher_for, recipe)
        settler = OrphanSettler(self.store, self.config, self.clock, self.ledger)
        return settler.settle(send, publishers)

    def _start(self, run_id: str) -> tuple[Recipe, Publication] | PublishResult:
        """One transaction: check the approval is fresh, move to `publishing`."""
        with self.store.transaction() as session:
            run = _locked_run(session, run_id)
            now = lease_now(session, self.clock)  # one clock for due, stale and too late
            recipe = self.config.recipes.get(run.recipe)
            if recipe is None or recipe.publish is None or run.state not in PUBLISHABLE:
                return PublishResult(PublishOutcome.NOT_READY, run_id)
            if run.state == RunState.UNCERTAIN and not look_up_due(run, recipe, now):
                grace = format_duration(lookup_grace(recipe))
                said = f"its lost answer is looked up {grace} after it (the read delay)"
                return PublishResult(PublishOutcome.NOT_READY, run_id, said)
            draft = _draft(session, run)
            if draft.state not in (DraftState.APPROVED, DraftState.PUBLISHED):
                # only an approved draft leaves the building: never a superseded one
                return PublishResult(PublishOutcome.NOT_READY, run_id, f"draft is {draft.state}")
            if run.state == RunState.APPROVED:
                if not_yet(run.publish_at, now):
                    return PublishResult(PublishOutcome.NOT_READY, run_id, "its time has not come")
                if approval_stale(recipe, draft.decided_at, run.publish_at, now):
                    send_back(session, run, draft, recipe.approval_ttl, now)
                    return PublishResult(PublishOutcome.SENT_BACK, run_id, "approval too old")
                if miss_its_time(session, recipe, run, now):  # never late beyond publish_late
                    return PublishResult(PublishOutcome.FAILED, run_id, "missed its slot")
                failpoint(Failpoint.PUBLISH_START_READ)  # tests: Unapprove racing the start
                move_run(session, run, RunState.PUBLISHING, actor=PUBLISHER, at=now)
            if draft.decided_by is None or draft.decided_at is None:
                return PublishResult(PublishOutcome.NOT_READY, run_id, "no approval on record")
            target = self._target(run.recipe)
            assert target is not None
            return recipe, Publication(
                effect_key=publish_effect_key(draft.key, target),
                draft_key=draft.key,
                recipe=run.recipe,
                platform=draft.platform,
                slot_at=run.slot_at,
                text=draft.text or "",
                approver=draft.decided_by,
                approved_at=draft.decided_at,
            )

    def _uncertain(self, run_id: str, detail: str) -> PublishResult:
        """The run is uncertain; people are told only when this was a look-up after the
        destination's read delay that could not tell (docs/design.md §9): a lost answer
        just now is looked up first, by a later pass."""
        self._move(run_id, RunState.UNCERTAIN, detail=detail)  # only a publishing run
        with self.store.read() as session:
            run = required(run_row(session, run_id), f"run {run_id}")
        if look_up_due(run, self.config.recipes.get(run.recipe), self.clock.now()):
            self.alert(run_id)
        return PublishResult(PublishOutcome.UNCERTAIN, run_id, detail)

    def _finish(self, run_id: str, external_id: str) -> PublishResult:
        with self.store.transaction() as session:
            now = self.clock.now()
            run = _locked_run(session, run_id)
            draft = _draft(session, run)
            if draft.state == DraftState.APPROVED:
                move_draft(
                    session,
                    draft,
                    DraftState.PUBLISHED,
                    actor=PUBLISHER,
                    at=now,
                    reason=external_id,
                )
            if run.state in (RunState.PUBLISHING, RunState.UNCERTAIN):
                move_run(
                    session,
                    run,
                    RunState.SUCCEEDED,
                    actor=PUBLISHER,
                    at=now,
                    detail=f"published as {external_id}",
                )
            elif run.state == RunState.CANCELLED:
                note = f"completed after cancellation: publish {run.draft_key} → {external_id}"
                note_outcome(session, run, note, now)
        return PublishResult(PublishOutcome.PUBLISHED, run_id, external_id=external_id)

    def _move(
        self, run_id: str, state: RunState, *, reason: str | None = None, detail: str
    ) -> None:
        """The run moves to `state` if it still may: a person may have settled it."""
        with self.store.transaction() as session:
            run = _locked_run(session, run_id)
            if run_may_move(run.state, state):
                now = self.clock.now()
                move_run(session, run, state, actor=PUBLISHER, at=now, reason=reason, detail=detail)

    def _target(self, recipe_name: str) -> str | None:
        recipe = self.config.recipes.get(recipe_name)
        return None if recipe is None or recipe.publish is None else recipe.publish.target


def _locked_run(session: Session, run_id: str) -> RunRow:
    return required(lock_run(session, run_id), f"run {run_id}")


def _draft(session: Session, run: RunRow) -> DraftRow:
    return required(lock_draft_of(session, run), f"draft of run {run.id}")
