"""An alert's two effects on the alert channel, each a step `EffectLedger.perform` acts
through by name: posted once (`AlertPost`, the message's channel and ts kept as the
receipt's proof, so it can be settled later) and rewritten as settled (`AlertSettle`,
repeatable). Run alerts (alerts.py) and poll alerts (poll_alerts.py) both go this way.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.ports import Alerter, MessageRef, RunAlert
from core.store.receipts import Proof


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
