"""State changes that write their event row in the same transaction.

Every transition goes through here: the state machine is checked (illegal ones raise
`IllegalTransition`) and one event row records who or what, when and why.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from core import observe
from core.models import DraftRow, EffectRow, EventRow, RunRow
from core.states import DraftState, EffectState, RunState, check_draft, check_effect, check_run


def record_event(
    session: Session,
    *,
    subject: str,
    subject_id: str,
    to_state: str,
    actor: str,
    at: datetime,
    run_id: str | None = None,
    from_state: str | None = None,
    reason: str | None = None,
) -> None:
    session.add(
        EventRow(
            at=at,
            subject=subject,
            subject_id=subject_id,
            run_id=run_id,
            from_state=from_state,
            to_state=to_state,
            actor=actor,
            reason=reason,
        )
    )
    observe.state_changed(
        session,
        subject=subject,
        subject_id=subject_id,
        run_id=run_id,
        from_state=from_state,
        to_state=to_state,
        actor=actor,
        reason=reason,
    )


def move_run(
    session: Session,
    run: RunRow,
    target: RunState,
    *,
    actor: str,
    at: datetime,
    reason: str | None = None,
    detail: str | None = None,
) -> None:
    """`reason` is stored on the run (an enum value where there is one); `detail`, a
    sentence for people, goes to the event row instead when given."""
    current = RunState(run.state)
    check_run(current, target)
    run.state = target
    run.reason = reason
    run.updated_at = at
    session.add(run)
    record_event(
        session,
        subject="run",
        subject_id=run.id,
        run_id=run.id,
        from_state=current,
        to_state=target,
        actor=actor,
        at=at,
        reason=detail or reason,
    )


def move_draft(
    session: Session,
    draft: DraftRow,
    target: DraftState,
    *,
    actor: str,
    at: datetime,
    reason: str | None = None,
) -> None:
    current = DraftState(draft.state)
    check_draft(current, target)
    draft.state = target
    draft.updated_at = at
    session.add(draft)
    record_event(
        session,
        subject="draft",
        subject_id=draft.key,
        run_id=draft.run_id,
        from_state=current,
        to_state=target,
        actor=actor,
        at=at,
        reason=reason,
    )


def move_effect(
    session: Session,
    effect: EffectRow,
    target: EffectState,
    *,
    actor: str,
    at: datetime,
    run_id: str | None = None,
    reason: str | None = None,
) -> None:
    current = EffectState(effect.state)
    check_effect(current, target)
    effect.state = target
    effect.detail = reason
    effect.updated_at = at
    session.add(effect)
    record_event(
        session,
        subject="effect",
        subject_id=effect.key,
        run_id=run_id,
        from_state=current,
        to_state=target,
        actor=actor,
        at=at,
        reason=reason,
    )


def note_draft(session: Session, draft: DraftRow, *, actor: str, at: datetime, reason: str) -> None:
    """History for a draft whose state stays as it is (an edit, a claim taken over)."""
    record_event(
        session,
        subject="draft",
        subject_id=draft.key,
        run_id=draft.run_id,
        from_state=draft.state,
        to_state=draft.state,
        actor=actor,
        at=at,
        reason=reason,
    )


def note_run(
    session: Session,
    run: RunRow,
    *,
    actor: str,
    at: datetime,
    reason: str,
    to_state: str | None = None,
) -> None:
    """History for a run whose state stays as it is: queued, or a refusal (`to_state`
    names what was refused) that the state machine cannot show."""
    record_event(
        session,
        subject="run",
        subject_id=run.id,
        run_id=run.id,
        from_state=run.state,
        to_state=to_state or run.state,
        actor=actor,
        at=at,
        reason=reason,
    )
