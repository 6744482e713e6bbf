"""The values the effect ledger (core/store/effects.py) is given and answers with: an
effect's spec, its receipt, what `begin` decided, what `perform` came to, and the proof
that an effect happened. Values only: nothing here reads or writes the database.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session

from core.errors import EffectNotSent
from core.models import EffectRow
from core.policies import EffectDecision, EffectOutcome, EffectStep
from core.states import EffectState

MayAct = Callable[[Session, datetime], str | None]
"""Run inside the fence's transaction with its lease time, before the receipt is touched
(lock order: run, draft, then effect): None when the effect may still happen, else why
not. It may write (a stale approval sent back), in the transaction that fails the receipt."""


@dataclass(frozen=True)
class Receipt:
    key: str
    state: EffectState
    external_id: str | None
    result: dict[str, Any] | None
    detail: str | None
    tries: int
    updated_at: datetime | None = None  # when it last changed (a success: when it succeeded)

    @classmethod
    def of(cls, row: EffectRow) -> Receipt:
        return cls(
            key=row.key,
            state=EffectState(row.state),
            external_id=row.external_id,
            result=json.loads(row.result) if row.result else None,
            detail=row.detail,
            tries=row.tries,
            updated_at=row.updated_at,
        )


@dataclass(frozen=True)
class EffectSpec:
    """One external effect: its key, what it is bound to, and how long one call may hold it."""

    key: str
    draft_key: str
    step: EffectStep
    payload: Any
    lease: timedelta
    run_id: str | None = None
    backoff: bool = False  # a refusal with no Retry-After waits 2, 4 … 300 s before the next try
    on_wire: timedelta = timedelta(0)  # how long one call may take: a lapsed holder's
    # call may still land this long after its lease ran out, so nobody takes over before
    # the receipt records the moment its call leaves (`SENDING`): a holder that died
    # before then provably sent nothing, and the effect is sent again, not left uncertain
    # (a destination with no look-up: Telegram)
    marks_send: bool = False


@dataclass(frozen=True)
class EffectStart:
    """What `begin` decided. For ACT and RECONCILE, `owner` holds the receipt: only it
    may settle it."""

    decision: EffectDecision
    receipt: Receipt
    spec: EffectSpec
    owner: str | None = None

    @property
    def key(self) -> str:
        return self.spec.key


@dataclass(frozen=True)
class Performed:
    """What `perform` came to: the outcome, the receipt when there is one, why, and the
    destination's refusal when it refused (its `permanent`/`auth` decide what follows)."""

    outcome: EffectOutcome
    receipt: Receipt | None = None
    detail: str | None = None
    refusal: EffectNotSent | None = None

    @property
    def happened(self) -> bool:
        return self.outcome.happened

    @property
    def external_id(self) -> str | None:
        return None if self.receipt is None else self.receipt.external_id


@dataclass(frozen=True)
class Proof:
    """What shows an effect happened: the destination's id, and anything worth keeping."""

    external_id: str
    result: dict[str, Any] | None = None
