"""Why a model call failed, in words for the people who must act on it (docs/design.md §12).

The attempts ledger records each call's outcome, HTTP status and error; this turns the
last of them into one sentence ("connection refused to the Anthropic API") for alerts,
`galley retry` and `galley draft`. Plain text: the Slack adapter escapes it.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from core.drafting_policies import AttemptOutcome
from core.models import AttemptRow


def attempt_cause(outcome: str | None, status: int | None, error: str | None) -> str:
    """One sentence for one failed model call."""
    detail = (error or "").strip()
    if outcome == AttemptOutcome.NOT_SENT:
        if "refused" in detail.lower():
            return "connection refused to the Anthropic API"
        return f"the Anthropic API could not be reached ({detail or 'no connection'})"
    if outcome == AttemptOutcome.REJECTED_RETRYABLE:
        return f"the Anthropic API turned the call away (HTTP {status}: overloaded or busy)"
    if outcome == AttemptOutcome.OUTCOME_UNKNOWN:
        return "no complete answer from the Anthropic API (timed out or dropped)"
    if outcome == AttemptOutcome.AUTH:
        return f"the Anthropic API refused Galley's key (HTTP {status})"
    if outcome == AttemptOutcome.INVALID_REQUEST:  # the error starts with its status too
        detail = detail.removeprefix(f"HTTP {status}: ") if status else detail
        return f"the Anthropic API rejected the request (HTTP {status}): {detail}"
    if outcome == AttemptOutcome.MALFORMED_ANSWER:
        return f"the model's answer was not a whole set of versions ({detail})"
    if outcome == AttemptOutcome.ABANDONED:
        return "the process drafting it stopped mid-call"
    return detail or "no model call was made"


def last_attempt_cause(session: Session, run_id: str) -> str | None:
    """The cause of the run's latest failed model call, or None if none failed."""
    last = session.exec(
        select(AttemptRow)
        .where(col(AttemptRow.run_id) == run_id, col(AttemptRow.outcome) != AttemptOutcome.OK)
        .order_by(col(AttemptRow.number).desc())
        .limit(1)
    ).first()
    if last is None:
        return None
    return attempt_cause(last.outcome, last.http_status, last.error)
