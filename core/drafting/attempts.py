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
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.drafting_policies import AttemptOutcome
from core.errors import ConcurrentChange, LostClaim, ModelCallFailed
from core.failpoints import Failpoint, failpoint
from core.identity import attempt_id
from core.models import AttemptRow, DraftRow
from core.ports import ModelReply
from core.setup.config import Recipe
from core.store.conditions import unfinished_batch_entry_of
from core.store.engine import insert_ignore
from core.store.leases import LeaseTable, fence

_ATTEMPTS: Any = AttemptRow.__table__  # type: ignore[attr-defined]
_ATTEMPT = "attempt_id"
NUMBER_TRIES = 8  # attempt numbers tried while other calls of the run take them
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
    """An attempt that is an entry waiting in (or for) a Message Batch (the condition
    lives in core/store/conditions.py, shared with the status read)."""
    return unfinished_batch_entry_of(col(AttemptRow.mode), col(AttemptRow.finished_at))


def waiting_in_batch(draft_key: Any) -> sa.ColumnElement[bool]:
    """The draft key has an entry waiting in a Message Batch: its claim holds the slot
    but nothing is being paid for meanwhile."""
    return sa.exists().where(col(AttemptRow.draft_key) == draft_key, unfinished_batch_entry())


class Attempts(NamedTuple):
    """A draft key's model calls since its claim began (`made`; calls before it, given
    back with a failed run, do not count) and its run's highest attempt number (`last`):
    the one rule `max_attempts` is judged by, for a slot's draft, a batch entry and a
    reviewer's redraft alike."""

    made: int
    last: int | None

    def spent(self, max_attempts: int) -> bool:
        return self.made >= max_attempts

    @property
    def next_number(self) -> int:
        return (self.last or 0) + 1


def attempts_of(session: Session, draft: DraftRow) -> Attempts:
    """The attempts of a draft the caller has read (locked, when it will add one)."""
    params = {"draft_key": draft.key, "run_id": draft.run_id}
    used, last = session.execute(_attempts_so_far_statement(), params).one()
    return Attempts(int(used) - draft.attempts_before, last)


def attempts_of_key(draft_key: Any) -> Any:
    """The attempts made for `draft_key` (a bind parameter or a column), as a scalar
    subquery: by this claim and by the claims given back before it."""
    return (
        select(sa.func.count())
        .select_from(AttemptRow)
        .where(col(AttemptRow.draft_key) == draft_key)
        .scalar_subquery()
    )


def model_calls_of_run(run_id: Any) -> Any:
    """Every model call made for a run (a bind parameter or a column), as a scalar
    subquery: each draft, retry, redraft and batch entry of every version. What the
    `runs` table's "model calls" and a failed run's alert count: one definition."""
    return (
        select(sa.func.count())
        .select_from(AttemptRow)
        .where(col(AttemptRow.run_id) == run_id)
        .scalar_subquery()
    )


def _last_number_of_run(run_id: Any) -> Any:
    return select(sa.func.max(AttemptRow.number)).where(col(AttemptRow.run_id) == run_id)


@functools.cache
def _attempts_so_far_statement() -> Any:
    """Built once, bound per call (every attempt asks it: bench/draft_overhead.py)."""
    return sa.select(
        attempts_of_key(sa.bindparam("draft_key")),
        _last_number_of_run(sa.bindparam("run_id")).scalar_subquery(),
    )


@functools.cache
def _attempts_of_draft_statement() -> Any:
    """A draft's attempts since its claim began and its run's last number, from its row."""
    made = attempts_of_key(col(DraftRow.key)) - col(DraftRow.attempts_before)
    last = _last_number_of_run(col(DraftRow.run_id)).scalar_subquery()
    return sa.select(made.label("made"), last.label("last")).where(
        col(DraftRow.key) == sa.bindparam("draft_key")
    )


@dataclass(frozen=True)
class UnderClaim:
    """What a model call is paid under: the claim's lease (a slot draft's or a redraft's)
    and the draft its attempts count against."""

    table: LeaseTable
    lease_key: str
    owner: str
    draft_key: str
    run_id: str


def begin_attempt(
    session: Session,
    claim: UnderClaim,
    recipe: Recipe,
    now: datetime,
    started_at: datetime,
    *,
    lease: timedelta | None = None,
    **kind: object,
) -> int | None:
    """The one way a model call begins, for a slot's draft, a batch entry and its
    fallback, and a reviewer's redraft: the claim is fenced (still `owner`'s, unexpired
    by the database's clock `now`, extended by `lease`, `takeover_after` unless said),
    else `LostClaim` and no call; None at `max_attempts`; else the attempt row is written
    before the call and its number returned, its start on the caller's clock. `kind` is
    `redraft=`, `cause=`, or a batch entry's `mode=` and `wait_until=`."""
    extended = recipe.takeover_after if lease is None else lease
    if not fence(session, claim.table, claim.lease_key, claim.owner, extended, now):
        raise LostClaim(f"claim on {claim.lease_key} is no longer held by {claim.owner}")
    made, last = session.execute(
        _attempts_of_draft_statement(), {"draft_key": claim.draft_key}
    ).one()
    attempts = Attempts(int(made), last)
    if attempts.spent(recipe.max_attempts):
        return None
    failpoint(Failpoint.ATTEMPT_NUMBER_READ)  # tests: another call of the run numbered here
    return add_attempt(session, claim, recipe, attempts.next_number, started_at, **kind)


class Holder(Protocol):
    """Whoever a model call is paid under: a slot's claim or a redraft's."""

    @property
    def run_id(self) -> str: ...

    @property
    def draft_key(self) -> str: ...

    @property
    def owner(self) -> str: ...


def add_attempt(
    session: Session,
    claim: Holder,
    recipe: Recipe,
    number: int,
    started_at: datetime,
    **kind: object,
) -> int:
    """The attempt row, written before its call, and the number it took; `kind` is
    `redraft=`, `cause=`, or a batch entry's `mode=` and `wait_until=` (the other columns
    take their defaults). `number` is the run's next as the caller read it; two calls of
    one run under different claims (a redraft of an older version's draft while a bump's
    claim drafts) may read the same one at once on PostgreSQL (READ COMMITTED): the unique
    (run, number) decides, and the loser reads the run's last number again and takes the
    next, never failing the call nor sharing a number."""
    for _ in range(NUMBER_TRIES):
        row: dict[str, Any] = {
            "id": attempt_id(claim.run_id, number),
            "run_id": claim.run_id,
            "recipe": recipe.name,
            "draft_key": claim.draft_key,
            "number": number,
            "worker": claim.owner,
            "model": recipe.model,
            "started_at": started_at,
            **kind,
        }
        if insert_ignore(session, AttemptRow, **row):
            return number
        last = session.execute(_last_number_of_run(claim.run_id)).scalar_one()
        number = max(number, last or 0) + 1
    raise ConcurrentChange(f"{claim.run_id}: no attempt number free after {NUMBER_TRIES} tries")


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
    finish_attempt_row(session, attempt_id(run_id, number), values, failure=failure, reply=reply)


def finish_attempt_row(
    session: Session,
    row_id: str,
    values: dict[str, object],
    *,
    failure: ModelCallFailed | None = None,
    reply: ModelReply | None = None,
) -> None:
    """`finish_attempt` by the attempt row's id (an alt text's is its own key,
    docs/design.md §32)."""
    row: dict[str, object] = {_ATTEMPT: row_id}
    finished = session.execute(_FINISH_ATTEMPT, row | values | attempt_outcome(failure, reply))
    if reply is not None and finished.rowcount == 0:  # type: ignore[attr-defined]
        session.execute(_ATTEMPT_USAGE, row | usage_of(reply))  # abandoned, but paid for


def attempt_outcome(failure: ModelCallFailed | None, reply: ModelReply | None) -> dict[str, object]:
    """The attempt row's columns for how a model call ended: its failure, or its reply
    and usage."""
    if failure is not None:
        failed: dict[str, object] = {
            "outcome": failure.outcome,
            "error": str(failure)[:2000],
            "http_status": failure.status,
            "request_id": failure.request_id,
        }
        return failed | (failure.paid_usage or {})
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


def abandon_unfinished_attempts(session: Session, key: str, now: datetime) -> None:
    session.execute(
        sa.update(AttemptRow)
        .where(col(AttemptRow.draft_key) == key, col(AttemptRow.finished_at).is_(None))
        .values(outcome=AttemptOutcome.ABANDONED, finished_at=now)
    )
