"""The attempts ledger: every model call is an attempt row written before the call and
finished after it, for a slot's draft and a reviewer's redraft alike, so what was paid
for is on record even when the process dies mid-call (docs/design.md §4).

The statements are built once and bound per call: building them anew cost more CPU than
sending them (bench/draft_overhead.py).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.errors import ModelCallFailed
from core.identity import attempt_id
from core.models import AttemptRow
from core.policies import AttemptOutcome, Drafting
from core.ports import ModelReply

_ATTEMPTS: Any = AttemptRow.__table__  # type: ignore[attr-defined]
_ATTEMPT = "attempt_id"
_INSERT_ATTEMPT = sa.insert(_ATTEMPTS)
_ATTEMPT_USAGE = sa.update(_ATTEMPTS).where(_ATTEMPTS.c.id == sa.bindparam(_ATTEMPT))
_FINISH_ATTEMPT = _ATTEMPT_USAGE.where(_ATTEMPTS.c.finished_at.is_(None))


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with jitter; Retry-After wins when the API sends it."""

    base_seconds: float = 1.0
    cap_seconds: float = 30.0
    retry_after_cap_seconds: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap_seconds)
        exponential = min(self.cap_seconds, self.base_seconds * 2 ** (attempt - 1))
        return float(exponential * random.uniform(0.5, 1.0))


def unfinished_batch_entry() -> sa.ColumnElement[bool]:
    """An attempt that is an entry waiting in (or for) a Message Batch: the one condition,
    answered by the partial index ix_attempts_waiting."""
    return sa.and_(col(AttemptRow.mode) == Drafting.BATCH, col(AttemptRow.finished_at).is_(None))


def waiting_in_batch(draft_key: Any) -> sa.ColumnElement[bool]:
    """The draft key has an entry waiting in a Message Batch: its claim holds the slot
    but nothing is being paid for meanwhile."""
    return sa.exists().where(col(AttemptRow.draft_key) == draft_key, unfinished_batch_entry())


def attempts_so_far(session: Session, draft_key: str, run_id: str) -> tuple[int, int | None]:
    """In one statement: the attempts made for `draft_key` (by this claim and the ones
    given back before it), and the run's highest attempt number."""
    params = {"draft_key": draft_key, "run_id": run_id}
    used, last = session.execute(_attempts_so_far_statement(), params).one()
    return int(used), last


@functools.cache
def _attempts_so_far_statement() -> Any:
    """Built once, bound per call (every attempt asks it: bench/draft_overhead.py)."""
    of_key = (
        select(sa.func.count())
        .select_from(AttemptRow)
        .where(col(AttemptRow.draft_key) == sa.bindparam("draft_key"))
        .scalar_subquery()
    )
    of_run = (
        select(sa.func.max(AttemptRow.number))
        .where(col(AttemptRow.run_id) == sa.bindparam("run_id"))
        .scalar_subquery()
    )
    return sa.select(of_key, of_run)


def add_attempt(
    session: Session,
    *,
    run_id: str,
    number: int,
    draft_key: str,
    recipe: str,
    worker: str,
    model: str,
    started_at: datetime,
    **kind: object,
) -> None:
    """The attempt row, written before its call; `kind` is `redraft=` or `cause=` (the
    other columns take their defaults)."""
    row = {
        "id": attempt_id(run_id, number),
        "run_id": run_id,
        "recipe": recipe,
        "draft_key": draft_key,
        "number": number,
        "worker": worker,
        "model": model,
        "started_at": started_at,
    }
    session.execute(_INSERT_ATTEMPT, row | kind)


def finish_attempt(
    session: Session,
    run_id: str,
    number: int,
    values: dict[str, object],
    *,
    failure: ModelCallFailed | None = None,
    reply: ModelReply | None = None,
) -> None:
    """How the call ended, written once: an attempt already marked abandoned by a new
    owner stays so, but what its call cost was paid all the same, and counts."""
    row: dict[str, object] = {_ATTEMPT: attempt_id(run_id, number)}
    finished = session.execute(_FINISH_ATTEMPT, row | values | attempt_outcome(failure, reply))
    if reply is not None and finished.rowcount == 0:  # type: ignore[attr-defined]
        session.execute(_ATTEMPT_USAGE, row | usage_of(reply))  # abandoned, but paid for


def attempt_outcome(failure: ModelCallFailed | None, reply: ModelReply | None) -> dict[str, object]:
    """The attempt row's columns for how a model call ended: its failure, or its reply
    and usage."""
    if failure is not None:
        return {
            "outcome": failure.outcome,
            "error": str(failure)[:2000],
            "http_status": failure.status,
            "request_id": failure.request_id,
        }
    if reply is None:
        return {}
    values: dict[str, object] = {
        "outcome": AttemptOutcome.OK,
        "model": reply.model,
        "request_id": reply.request_id,
        "stop_reason": reply.stop_reason,
    }
    return values | usage_of(reply)


def usage_of(reply: ModelReply) -> dict[str, int]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cache_creation_tokens": reply.cache_creation_tokens,
        "cache_read_tokens": reply.cache_read_tokens,
    }
