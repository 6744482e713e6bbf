"""Publishing an approved draft exactly once (DESIGN.md §4.3-4.6).

Every publication is an effect with a receipt. The destination is asked before
publishing and before any retry of an uncertain attempt: found → record it, done;
clearly absent → publish once, under the same key; cannot tell → the run becomes
`uncertain` and people are asked. An approval older than `approval_ttl` when
publishing starts is not used: the draft goes back to review. The receipt's lease is
kept alive by heartbeat for as long as the call runs (429 waits included), so no other
pass takes a slow send for a dead one; a run cancelled before the send stops it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from sqlmodel import Session

from core.config import Config, Recipe
from core.effects import EffectLedger, EffectSpec, EffectStart, Proof
from core.errors import (
    ConcurrentChange,
    EffectInProgress,
    EffectNotSent,
    EffectOutcomeUnknown,
    GalleyError,
    LookupUnavailable,
)
from core.failpoints import failpoint
from core.history import guarded_update, move_draft, move_run, note_run
from core.identity import publish_effect_key, text_hash
from core.models import DraftRow, RunRow
from core.policies import EffectDecision, FailReason, PublishOutcome
from core.ports import Clock, PostQuery, Publication, Publisher
from core.publish_queue import PUBLISH_STEP, PUBLISHABLE, OrphanedSend, orphaned_sends, publishable
from core.rows import lock_draft, lock_draft_of, lock_run, required
from core.states import DraftState, RunState, run_may_move
from core.store import Store

log = logging.getLogger(__name__)

PUBLISHER = "publisher"
MAX_PUBLISH_BACKOFF_SECONDS = 300.0
ORPHAN_NOT_SENT = "absent at the destination; its run no longer publishes it, so it is not sent"


@dataclass(frozen=True)
class PublishResult:
    outcome: PublishOutcome
    run_id: str
    detail: str | None = None
    external_id: str | None = None


PublisherFor = Callable[[Recipe], Publisher]
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
        with self.store.read() as session:
            rows = publishable(session)
        return [run_id for run_id, recipe in rows if self._target(recipe) is not None]

    def publish_pending(self) -> list[PublishResult]:
        """The reconciler's pass: every approved, publishing or uncertain run, once, then
        the sends whose run stopped publishing them before their outcome was known. One
        run's error is logged and does not hold up the others."""
        results = [self._logged(self.publish_run, run) for run in self.publishable_runs()]
        with self.store.read() as session:
            orphans = orphaned_sends(session, self.clock.now())
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
        started = self._start(run_id)
        if isinstance(started, PublishResult):
            return started
        recipe, publication = started
        publisher = self.publisher_for(recipe)
        failpoint("after_publishing_commit")
        spec = EffectSpec(
            publication.effect_key,
            draft_key=publication.draft_key,
            step=PUBLISH_STEP,
            payload=_payload(publisher.target, publication.draft_key, publication.text),
            lease=recipe.call_timeout * 4,
            run_id=run_id,
        )
        for _ in range(2):  # a second pass only after a lookup proved it absent
            try:
                start = self.ledger.begin(spec)
            except EffectInProgress as exc:
                return PublishResult(PublishOutcome.IN_PROGRESS, run_id, str(exc))
            if start.decision == EffectDecision.DONE:
                return self._finish(run_id, start.receipt.external_id or "")
            if start.decision == EffectDecision.WAIT:
                return PublishResult(PublishOutcome.WAITING, run_id, start.receipt.detail)
            found = self._look(run_id, publisher, publication, start)
            if isinstance(found, PublishResult):
                return found
            if found is not None:
                self.ledger.succeed(start, Proof(found, {"found": True}))
                return self._finish(run_id, found)
            if start.decision == EffectDecision.RECONCILE:
                self.ledger.fail(start, "absent at the destination")
                continue
            if self.clock.now() - publication.approved_at > recipe.approval_ttl:
                # A new send needs a fresh approval, even for a run resolved days later.
                self.ledger.fail(start, "approval went stale")
                self._send_back_run(run_id, recipe.approval_ttl)
                return PublishResult(PublishOutcome.SENT_BACK, run_id, "approval too old")
            return self._act(run_id, publisher, publication, start)
        return PublishResult(PublishOutcome.WAITING, run_id, "absent; will publish next pass")

    def settle_orphan(self, send: OrphanedSend) -> PublishResult | None:
        """Ask the destination about an orphaned send; None while nobody can tell (people
        heard of it when they cancelled). Absent, its receipt says it never happened."""
        recipe = self.config.recipes.get(send.recipe)
        if recipe is None or recipe.publish is None:
            return None  # no destination left to ask
        publisher = self.publisher_for(recipe)
        if publish_effect_key(send.draft_key, publisher.target) != send.effect_key:
            return None  # the recipe publishes elsewhere now
        try:
            # a probe, before anything is written
            found = publisher.lookup(PostQuery(send.effect_key, send.text, send.since))
        except LookupUnavailable:
            return None
        payload = _payload(publisher.target, send.draft_key, send.text)
        spec = EffectSpec(
            send.effect_key,
            send.draft_key,
            PUBLISH_STEP,
            payload,
            recipe.call_timeout * 4,
            send.run_id,
        )
        try:
            start = self.ledger.begin(spec)
        except EffectInProgress:
            return None
        if start.decision == EffectDecision.ACT:  # settled as failed meanwhile: never sent now
            self.ledger.fail(start, ORPHAN_NOT_SENT)
        if start.decision != EffectDecision.RECONCILE:
            return None
        try:
            # absent: ask again, holding it
            found = found or publisher.lookup(PostQuery(send.effect_key, send.text, send.since))
        except LookupUnavailable:
            self.ledger.release(start)
            return None
        # The run and draft first, the receipt last: a pass that stops in between leaves
        # the receipt unsettled, so the next one finds the send again and notes it once.
        if found is None:
            self._note_orphan(send, f"not sent: publish {send.draft_key}")
            failpoint("orphan_noted")
            self.ledger.fail(start, ORPHAN_NOT_SENT)
            return PublishResult(PublishOutcome.NOT_READY, send.run_id, ORPHAN_NOT_SENT)
        self._note_orphan(send, f"publish {send.draft_key} → {found}", published=True)
        failpoint("orphan_noted")
        self.ledger.succeed(start, Proof(found, {"found": True}))
        return PublishResult(PublishOutcome.PUBLISHED, send.run_id, external_id=found)

    def _note_orphan(self, send: OrphanedSend, outcome: str, *, published: bool = False) -> None:
        with self.store.transaction() as session:
            now = self.clock.now()
            run = _locked_run(session, send.run_id)
            draft = required(lock_draft(session, send.draft_key), f"draft {send.draft_key}")
            if published and draft.state == DraftState.APPROVED:
                move_draft(session, draft, DraftState.PUBLISHED, actor=PUBLISHER, at=now)
            when = "after cancellation" if run.state == RunState.CANCELLED else "later"
            _note_outcome(
                session, run, f"completed {when}: {outcome}" if published else outcome, now
            )

    def _start(self, run_id: str) -> tuple[Recipe, Publication] | PublishResult:
        """One transaction: check the approval is fresh, move to `publishing`."""
        with self.store.transaction() as session:
            now = self.clock.now()
            run = _locked_run(session, run_id)
            recipe = self.config.recipes.get(run.recipe)
            if recipe is None or recipe.publish is None or run.state not in PUBLISHABLE:
                return PublishResult(PublishOutcome.NOT_READY, run_id)
            draft = _draft(session, run)
            if draft.state not in (DraftState.APPROVED, DraftState.PUBLISHED):
                # only an approved draft leaves the building: never a superseded one
                return PublishResult(PublishOutcome.NOT_READY, run_id, f"draft is {draft.state}")
            if run.state == RunState.APPROVED:
                if draft.decided_at is None or now - draft.decided_at > recipe.approval_ttl:
                    _send_back(session, run, draft, recipe.approval_ttl, now)
                    return PublishResult(PublishOutcome.SENT_BACK, run_id, "approval too old")
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

    def _look(
        self, run_id: str, publisher: Publisher, publication: Publication, start: EffectStart
    ) -> str | PublishResult | None:
        """Look before you leap. A first attempt may go ahead when the destination
        cannot answer (our receipt is all there is); a retry of an uncertain one may not."""
        try:
            return publisher.lookup(
                PostQuery(publication.effect_key, publication.text, publication.approved_at)
            )
        except LookupUnavailable as exc:
            if start.decision == EffectDecision.ACT:
                return None
            self.ledger.release(start)
            return self._uncertain(run_id, str(exc))

    def _act(
        self, run_id: str, publisher: Publisher, publication: Publication, start: EffectStart
    ) -> PublishResult:
        if not self._still_publishing(run_id):
            self.ledger.fail(start, "the run was cancelled before it was sent")
            return PublishResult(PublishOutcome.NOT_READY, run_id, "cancelled before the send")
        failpoint("before_publish_call")
        try:
            with self.ledger.held(start):  # a slow send (429 waits) keeps its receipt
                external_id = publisher.publish(publication)
        except EffectNotSent as exc:
            if not exc.permanent:  # honour Retry-After, else back off: 2, 4, … 300 s
                tries = start.receipt.tries
                wait = exc.retry_after if exc.retry_after is not None else 2.0**tries
                retry_after = timedelta(seconds=min(wait, MAX_PUBLISH_BACKOFF_SECONDS))
                self.ledger.fail(start, str(exc), retry_after=retry_after)
                return PublishResult(PublishOutcome.WAITING, run_id, str(exc))
            self.ledger.fail(start, str(exc))
            reason = FailReason.PUBLISH_AUTH if exc.auth else FailReason.PUBLISH_REJECTED
            self._move(run_id, RunState.FAILED, reason=reason, detail=str(exc))
            if exc.auth:
                self.alert(run_id)  # 401/403: stop and tell people
            return PublishResult(PublishOutcome.FAILED, run_id, str(exc))
        except EffectOutcomeUnknown as exc:
            self.ledger.mark_uncertain(start, str(exc))
            return self._uncertain(run_id, str(exc))
        failpoint("after_publish_call")
        self.ledger.succeed(start, Proof(external_id))
        return self._finish(run_id, external_id)

    def _still_publishing(self, run_id: str) -> bool:
        """The last look before a send: a run cancelled (or settled) meanwhile is not sent.
        Cancelling after this point finds the receipt in flight and says so."""
        with self.store.transaction() as session:
            run = _locked_run(session, run_id)
        return run.state in (RunState.PUBLISHING, RunState.UNCERTAIN)

    def _uncertain(self, run_id: str, detail: str) -> PublishResult:
        self._move(run_id, RunState.UNCERTAIN, detail=detail)  # only a publishing run
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
                _note_outcome(session, run, note, now)
        return PublishResult(PublishOutcome.PUBLISHED, run_id, external_id=external_id)

    def _send_back_run(self, run_id: str, ttl: timedelta) -> None:
        with self.store.transaction() as session:
            run = _locked_run(session, run_id)
            _send_back(session, run, _draft(session, run), ttl, self.clock.now())

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


def _note_outcome(session: Session, run: RunRow, note: str, now: datetime) -> None:
    """What became of a send after its run stopped publishing it. On a cancelled run it
    joins the list of completed effects (its reason), so people see what went out."""
    if run.state == RunState.CANCELLED:
        if note in (run.reason or ""):
            return  # noted already, by a pass that stopped before settling the receipt
        run.reason = f"{run.reason or 'completed effects: none'}; {note}"
        run.updated_at = now
        guarded_update(session, run, state=RunState.CANCELLED)
    note_run(session, run, actor=PUBLISHER, at=now, reason=note)


def _send_back(
    session: Session, run: RunRow, draft: DraftRow, ttl: timedelta, now: datetime
) -> None:
    """A stale approval is not revived: the draft is reviewed again, as a new revision so
    that buttons on the old message stop counting."""
    why = f"approval older than approval_ttl ({ttl}) when publishing started"
    draft.revision += 1
    draft.decided_by = draft.decided_at = None
    draft.decision_reason = (
        f"Back for review: the approval was older than {ttl} when publishing started."
    )
    draft.ready_at = now  # a full review window again, from now
    move_draft(session, draft, DraftState.READY, actor=PUBLISHER, at=now, reason=why)
    move_run(session, run, RunState.AWAITING_REVIEW, actor=PUBLISHER, at=now, detail=why)


def _payload(target: str, draft_key: str, text: str) -> dict[str, str]:
    return {"target": target, "draft_key": draft_key, "text": text_hash(text)}
