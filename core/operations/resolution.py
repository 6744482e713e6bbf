"""People settle what Galley cannot: mark an uncertain run published, declare it
absent (Galley then publishes once), retry it, skip a failed one, or cancel a run. Each
is one short transaction, with the rows it decides on locked, and an event naming the
person. A person's word wins over a pass that is looking the effect up at that moment:
the pass's owner token no longer matches and it changes nothing.
"""

from __future__ import annotations

import json
from datetime import datetime

from sqlmodel import Session, col, select

from core.errors import UnknownRun
from core.identity import manual_proof
from core.models import DraftRow, EffectRow, RunRow
from core.policies import DecisionKind, EffectStep, FailReason, Finding
from core.ports import Clock
from core.publishing.targets import REOPENED, all_published, receipt_keys
from core.setup.config import Config
from core.states import DraftState, EffectState, RunState, run_may_move
from core.store.engine import Store
from core.store.leases import EFFECT_RECEIPTS, hold, lease_now
from core.store.rows import lock_draft_of, lock_effect, lock_run
from core.store.transitions import Decided, move_draft, move_effect, move_run

__all__ = ["Finding", "Resolver"]

# publications that did not happen and that a person may send once more: refused, or
# approved drafts that missed their time (docs/design.md §23)
PUBLISH_REFUSALS = (FailReason.PUBLISH_AUTH, FailReason.PUBLISH_REJECTED, FailReason.MISSED_SLOT)


class Resolver:
    def __init__(self, store: Store, config: Config, clock: Clock) -> None:
        self.store, self.config, self.clock = store, config, clock

    def resolve(self, run_id: str, finding: Finding, *, actor: str) -> str:
        """A person says what became of an uncertain publication."""
        if finding == Finding.ABSENT:
            return self._publish_again(run_id, actor, why=f"{actor} says it was not published")
        with self.store.transaction() as session:
            found = self._uncertain(session, run_id)
            if isinstance(found, str):
                return found
            run, draft, effects = found
            now = self.clock.now()
            stamped = lease_now(session, self.clock)  # receipts: the database's clock
            for effect in effects:
                effect.external_id = manual_proof(actor)
                effect.result = json.dumps({"resolved_by": actor})
                move_effect(
                    session, effect, EffectState.SUCCEEDED, actor=actor, at=stamped, run_id=run_id
                )
            recipe = self.config.recipes[run.recipe]  # _uncertain found its publish keys
            if not all_published(session, recipe, draft.key if draft else ""):
                why = f"{actor} marked {', '.join(e.key for e in effects)} published"
                settled = _resolution(draft)
                move_run(
                    session,
                    run,
                    RunState.PUBLISHING,
                    actor=actor,
                    at=now,
                    detail=why,
                    decision=settled,
                )
                return f"`{run_id}`: marked published there; its other targets publish next."
            if draft is not None and draft.state == DraftState.APPROVED:
                move_draft(session, draft, DraftState.PUBLISHED, actor=actor, at=now)
            move_run(
                session,
                run,
                RunState.SUCCEEDED,
                actor=actor,
                at=now,
                detail="marked published by a person",
                decision=_resolution(draft),
            )
        return f"`{run_id}` marked published. Nothing will be sent again."

    def retry(self, run_id: str, *, actor: str) -> str:
        """Try an uncertain publication once more (the person takes the risk of a
        repeat), or a refused one (401/403, 400) once its cause is fixed: it is looked up
        and published once, under the same key, if its approval is still fresh."""
        with self.store.transaction() as session:
            run = _known_run(session, run_id)
            if run.state == RunState.FAILED and run.reason in PUBLISH_REFUSALS:
                return self._publish_refused_again(session, run, actor)
        return self._publish_again(run_id, actor, why=f"{REOPENED}: {actor} asked for a retry")

    def _publish_refused_again(self, session: Session, run: RunRow, actor: str) -> str:
        """A publication the destination refused: known not to have happened, so its
        receipt is failed already and the publish pass may act once more."""
        draft = lock_draft_of(session, run)
        effects = [
            e for e in (lock_effect(session, k) for k in self._publish_keys(session, run)) if e
        ]
        if draft is None or draft.state != DraftState.APPROVED:
            return (
                f"`{run.id}`'s draft is {draft.state if draft else 'missing'}: nothing to publish."
            )
        for effect in effects:  # one that succeeded is answered from its receipt, not re-sent
            if effect.state == EffectState.IN_FLIGHT:  # an uncertain one is looked up first
                busy = f"`{run.id}`'s publication {effect.key} is {effect.state}"
                return f"{busy}: a pass is already acting on it."
        why = f"{actor} asked for a retry after {run.reason}"
        now, retried = self.clock.now(), _resolution(draft)
        move_run(
            session, run, RunState.PUBLISHING, actor=actor, at=now, detail=why, decision=retried
        )
        return f"`{run.id}` will be published once more, under the same key."

    def cancel(self, run_id: str, *, actor: str) -> str:
        """Stop further steps; say which effects had already completed, and which sends
        are in flight or went without an answer: each is looked up, never sent again,
        and joins the run's list once its outcome is known (`PublishingService`)."""
        with self.store.transaction() as session:
            run, draft = self._locked(session, run_id)
            if not run_may_move(run.state, RunState.CANCELLED):
                return f"`{run_id}` is {run.state}: there is nothing left to cancel."
            drafts = select(DraftRow.key).where(col(DraftRow.run_id) == run.id)
            effects = session.exec(
                select(EffectRow).where(
                    col(EffectRow.draft_key).in_(drafts.scalar_subquery()),
                    col(EffectRow.state).in_(
                        [EffectState.SUCCEEDED, EffectState.IN_FLIGHT, EffectState.UNCERTAIN]
                    ),
                )
            ).all()
            now = self.clock.now()
            stamped = lease_now(session, self.clock)  # receipts: the database's clock
            effects = [*effects, *self._reopened(session, run, actor, stamped)]
            done = [e for e in effects if e.state == EffectState.SUCCEEDED]
            sending = [e.key for e in effects if e.state == EffectState.IN_FLIGHT]
            unknown = [e.key for e in effects if e.state == EffectState.UNCERTAIN]
            completed = ", ".join(f"{e.key} → {e.external_id}" for e in done) or "none"
            move_run(
                session,
                run,
                RunState.CANCELLED,
                actor=actor,
                at=now,
                reason=f"completed effects: {completed}",
                decision=_resolution(draft),
            )
            publishing = any(e.step == EffectStep.PUBLISH for e in effects)
            if draft is not None and _leaves_review(draft.state, publishing):
                draft.decided_by, draft.decided_at = actor, now
                move_draft(
                    session,
                    draft,
                    DraftState.CANCELLED,
                    actor=actor,
                    at=now,
                    reason="run cancelled",
                )
        answer = f"`{run_id}` cancelled. Effects already completed: {completed}."
        if sending:
            answer += f" Already in flight: {', '.join(sending)}."
        if unknown:
            answer += f" Sent, outcome unknown: {', '.join(unknown)}."
        if sending or unknown:
            answer += (
                " Nothing is sent again; whether it went out is added to the run's list of"
                " completed effects once the destination says."
            )
        return answer

    def _reopened(
        self, session: Session, run: RunRow, actor: str, now: datetime
    ) -> list[EffectRow]:
        """Publish receipts a retry reopened that no pass has acted on yet: their first
        send went without an answer, so it may be out there. Uncertain again, they are
        looked up like any send of a cancelled run, never taken as not sent."""
        if run.state != RunState.PUBLISHING:
            return []
        reopened = [
            e
            for e in (lock_effect(session, key) for key in self._publish_keys(session, run))
            if e is not None
            and e.state == EffectState.FAILED
            and (e.detail or "").startswith(REOPENED)
        ]
        for effect in reopened:
            move_effect(
                session,
                effect,
                EffectState.UNCERTAIN,
                actor=actor,
                at=now,
                run_id=run.id,
                reason="its run was cancelled after a retry: it may have been sent",
            )
        return reopened

    def skip(self, run_id: str, *, actor: str) -> str:
        """Give up on a failed run's slot: nobody will draft it again."""
        with self.store.transaction() as session:
            run, draft = self._locked(session, run_id)
            if run.state != RunState.FAILED:
                return f"`{run_id}` is {run.state}, not failed: nothing to skip."
            move_run(
                session,
                run,
                RunState.SKIPPED,
                actor=actor,
                at=self.clock.now(),
                reason=f"skipped by {actor} after failing ({run.reason})",
                decision=_resolution(draft),
            )
        return f"`{run_id}` skipped. It will not be drafted again."

    def _publish_again(self, run_id: str, actor: str, *, why: str) -> str:
        """One transaction, run and receipt locked: two clicks cannot both re-open it."""
        with self.store.transaction() as session:
            found = self._uncertain(session, run_id)
            if isinstance(found, str):
                return found
            run, draft, effects = found
            now = self.clock.now()
            stamped = lease_now(session, self.clock)  # receipts: the database's clock
            for effect in effects:
                hold(effect, EFFECT_RECEIPTS, None, None)
                move_effect(
                    session,
                    effect,
                    EffectState.FAILED,
                    actor=actor,
                    at=stamped,
                    run_id=run_id,
                    reason=why,
                )
            again = _resolution(draft)
            move_run(
                session, run, RunState.PUBLISHING, actor=actor, at=now, detail=why, decision=again
            )
        return f"`{run_id}` will be published once more, under the same key."

    def _uncertain(
        self, session: Session, run_id: str
    ) -> tuple[RunRow, DraftRow | None, list[EffectRow]] | str:
        """The run, its draft and its uncertain publish receipts (one per target whose
        outcome is unknown), locked, if the run is uncertain; otherwise a sentence saying
        why there is nothing to settle."""
        run = _known_run(session, run_id)
        keys = self._publish_keys(session, run)
        if run.state != RunState.UNCERTAIN or not keys:
            return f"`{run_id}` is {run.state}, not uncertain: nothing to settle."
        draft = lock_draft_of(session, run)  # run, draft, then effect: core/store/rows.py
        effects = [e for e in (lock_effect(session, key) for key in keys) if e is not None]
        unknown = [e for e in effects if e.state == EffectState.UNCERTAIN]
        if not unknown:
            states = ", ".join(str(e.state) for e in effects) or "missing"
            return f"`{run_id}`'s publication is {states}: a pass is already acting on it."
        return run, draft, unknown

    def _locked(self, session: Session, run_id: str) -> tuple[RunRow, DraftRow | None]:
        run = _known_run(session, run_id)
        return run, lock_draft_of(session, run)

    def _publish_keys(self, session: Session, run: RunRow) -> list[str]:
        """The publish effect key of each target of the run's recipe, in its order, each
        with its thread's later parts (docs/design.md §31)."""
        recipe = self.config.recipes.get(run.recipe)
        if recipe is None or run.draft_key is None:
            return []
        return receipt_keys(session, recipe, run.draft_key)


def _resolution(draft: DraftRow | None) -> Decided:
    """A person's settling of a run, about the revision its draft holds."""
    return Decided(DecisionKind.RESOLUTION, draft.revision if draft is not None else None)


def _leaves_review(state: DraftState, publishing: bool) -> bool:
    """A cancelled run's draft leaves the queue (ready), or the publish queue (approved
    with no send begun); an approved draft whose send may have gone out stays approved
    until that send's outcome is known."""
    return state == DraftState.READY or (state == DraftState.APPROVED and not publishing)


def _known_run(session: Session, run_id: str) -> RunRow:
    """The run a person named, locked; `UnknownRun` when there is none."""
    run = lock_run(session, run_id)
    if run is None:
        raise UnknownRun(f"no run {run_id!r}")
    return run
