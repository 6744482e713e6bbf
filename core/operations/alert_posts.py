"""An alert's two effects on the alert channel, each a step `EffectLedger.perform` acts
through by name: posted once (`AlertPost`, the message's channel and ts kept as the
receipt's proof, so it can be settled later) and rewritten as settled (`AlertSettle`,
repeatable). Run alerts (alerts.py) and poll alerts (poll_alerts.py) both go this way.
A message of a period (the daily digest, the weekly report) is posted once per period
across replicas by `post_once_in`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from core.policies import EffectStep
from core.ports import Alerter, MessageRef, RunAlert
from core.states import EffectState
from core.store.effects import EffectLedger
from core.store.receipts import EffectSpec, Proof

PERIODIC_LEASE = timedelta(minutes=5)  # reading and posting a digest or a report


@dataclass(frozen=True)
class AlertPost:
    alerter: Alerter
    alert: RunAlert

    def act(self) -> Proof:
        ref = self.alerter.alert(self.alert)
        return Proof(ref.ts, {"channel": ref.channel, "ts": ref.ts})


@dataclass(frozen=True)
class AlertSettle:
    alerter: Alerter
    ref: MessageRef
    alert: RunAlert

    def act(self) -> Proof:
        self.alerter.settle(self.ref, self.alert)
        return Proof(self.ref.ts)


def post_once_in(
    ledger: EffectLedger,
    key: str,
    step: EffectStep,
    period: dict[str, Any],
    post: Callable[[], MessageRef],
) -> bool:
    """The period's message (`key` names the period), posted once across replicas: the
    receipt is claimed before `post` reads anything, so a second replica reads nothing.
    True if this call posted it."""
    existing = ledger.get(key)
    if existing is not None and existing.state != EffectState.FAILED:
        return False
    spec = EffectSpec(key, draft_key="", step=step, payload=period, lease=PERIODIC_LEASE)
    return ledger.perform(spec, lambda: Proof(post().ts)).happened
