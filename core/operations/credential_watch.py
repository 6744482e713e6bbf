"""Warnings before a slot fails (docs/design.md §36): before each slot (at the recipe's
`draft_ahead`, else an hour before) and before each planned post, every target of the
recipe has its credentials proved as `galley check --online` proves them, at most once
an hour per target across replicas (a receipt per target and hour in the effect ledger).
A refusal is alerted once, naming the target and the variable to set, while there is
still time; a target with an open alert is proved every hour, slot or not, and the alert
is settled in place once a check passes again. Never publishes, never touches a run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import col, select

from core.identity import (
    alert_settled_key,
    credential_alert_key,
    credential_alert_range,
    credential_check_key,
    expiry_alert_key,
)
from core.models import EffectRow, RunRow
from core.policies import AlertKind, EffectStep, Trigger
from core.ports import Alerter, Clock, MessageRef, Publisher, RunAlert
from core.publishing.known_expiry import KnownExpiry, known_expiries
from core.publishing.platforms.online_check import CredentialProof, can_prove, prove_publisher
from core.setup.config import Config, Recipe
from core.slots.schedule import slots_between
from core.states import EffectState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.receipts import EffectSpec, Proof

log = logging.getLogger("galley.alerts")
LEAD = timedelta(hours=1)  # how long before a slot its targets are proved, without draft_ahead
CHECK_EVERY = timedelta(hours=1)  # at most one proof per target in each hour
CHECK_LEASE = timedelta(minutes=2)
ALERT_LEASE = timedelta(minutes=5)
PLANNED = (RunState.AWAITING_REVIEW, RunState.APPROVED)  # runs with a publication time ahead

PublishersFor = Callable[[Recipe], Sequence[Publisher]]


def lead_of(recipe: Recipe) -> timedelta:
    """How long before a slot its targets are proved: `draft_ahead`, else an hour."""
    return recipe.draft_ahead if recipe.draft_ahead > timedelta(0) else LEAD


def hour_of(now: datetime) -> datetime:
    return now.replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class Due:
    """A target to prove now, and the publication it is proved for (None: its alert is
    open, so it is proved every hour until a check passes)."""

    publisher: Publisher
    recipe: Recipe
    slot_at: datetime | None


@dataclass(eq=False)  # a service: compared and hashed by identity
class CredentialWatch:
    store: Store
    config: Config
    clock: Clock
    ledger: EffectLedger
    alerter: Alerter
    publishers_for: PublishersFor
    environ: Mapping[str, str] | None = None  # where known expiry dates are read; None: os's

    def sweep(self) -> int:
        """Prove the targets due; alert the refused once, settle the fixed; alert each
        known token expiry once, days ahead. Returns how many alerts were posted or
        settled."""
        now = self.clock.now()
        told = sum(self._expiry_once(e, now) for e in known_expiries(self.config, self.environ))
        open_alerts = self._open_alerts()
        for due in self._due(now, open_alerts):
            target = due.publisher.target
            proof = self._check_once(due.publisher, hour_of(now))
            if proof is None:
                continue  # proved already this hour, here or on another replica
            alert = open_alerts.get(target)
            if proof.ok and alert is not None:
                told += self._settle_once(alert, due, now)
            elif not proof.ok and alert is None:
                told += self._alert_once(due, proof, hour_of(now))
        return told

    def _due(self, now: datetime, open_alerts: dict[str, EffectRow]) -> list[Due]:
        soonest = self._next_publications(now)
        found: dict[str, Due] = {}
        for recipe in self.config.recipes.values():
            for publisher in self.publishers_for(recipe):
                target, slot_at = publisher.target, soonest.get(recipe.name)
                if not can_prove(publisher) or (slot_at is None and target not in open_alerts):
                    continue
                known = found.get(target)  # two recipes may share a target: the sooner
                if known is None or (slot_at is not None and _sooner(slot_at, known.slot_at)):
                    found[target] = Due(publisher, recipe, slot_at)
        return list(found.values())

    def _next_publications(self, now: datetime) -> dict[str, datetime]:
        """Each recipe's soonest slot or planned post within its lead time."""
        soonest: dict[str, datetime] = {}
        longest = max((lead_of(r) for r in self.config.recipes.values()), default=LEAD)
        with self.store.read() as session:
            planned = session.exec(
                select(RunRow).where(
                    col(RunRow.state).in_(PLANNED),
                    col(RunRow.publish_at) > now,
                    col(RunRow.publish_at) <= now + longest,
                )
            ).all()
        for run in planned:
            recipe = self.config.recipes.get(run.recipe)
            at = run.publish_at
            if recipe is not None and at is not None and at <= now + lead_of(recipe):
                soonest[run.recipe] = min(soonest.get(run.recipe, at), at)
        for recipe in self.config.recipes.values():
            if recipe.trigger != Trigger.SCHEDULE or not recipe.targets:
                continue
            slots = slots_between(recipe, now, now + lead_of(recipe))
            if slots:
                first = slots[0].fire_at
                soonest[recipe.name] = min(soonest.get(recipe.name, first), first)
        return soonest

    def _open_alerts(self) -> dict[str, EffectRow]:
        """Each target's latest credential alert posted and not yet settled."""
        found: dict[str, EffectRow] = {}
        with self.store.read() as session:
            for target in self._targets():
                low, high = credential_alert_range(target)
                rows = session.exec(
                    select(EffectRow)
                    .where(col(EffectRow.key) >= low, col(EffectRow.key) < high)
                    .order_by(col(EffectRow.key).desc())
                    .limit(2)
                ).all()
                alerts = [r for r in rows if r.step == EffectStep.ALERT]
                settled = {r.key for r in rows if r.step == EffectStep.ALERT_SETTLED}
                latest = alerts[0] if alerts else None
                posted = latest is not None and latest.state == EffectState.SUCCEEDED
                if latest is not None and posted and alert_settled_key(latest.key) not in settled:
                    found[target] = latest
        return found

    def _targets(self) -> list[str]:
        return sorted({t.target for r in self.config.recipes.values() for t in r.targets})

    def _check_once(self, publisher: Publisher, hour: datetime) -> CredentialProof | None:
        """The target proved under this hour's receipt; None if it was already proved."""
        proved: list[CredentialProof] = []

        def prove() -> Proof:
            proof = prove_publisher(publisher)
            assert proof is not None  # `_due` takes only targets with credentials to prove
            proved.append(proof)
            return Proof("ok" if proof.ok else "failed", {"ok": proof.ok, "said": proof.said})

        key = credential_check_key(publisher.target, hour)
        spec = EffectSpec(
            key, "", EffectStep.CREDENTIAL_CHECK, {"target": publisher.target}, CHECK_LEASE
        )
        performed = self.ledger.perform(spec, prove)
        return proved[0] if performed.happened and proved else None

    def _alert_once(self, due: Due, proof: CredentialProof, hour: datetime) -> int:
        alert = RunAlert(
            run_id="",
            recipe=due.recipe.name,
            headline=f"The credentials of `{proof.target}` were refused: {_when_next(due)}.",
            facts=[
                f"Latest answer: {proof.said}",
                f"Fix: {fix_of(due.recipe, proof.target)}",
                "Galley proves them again every hour and settles this alert once they pass.",
            ],
            mentions=list(self.config.slack.alert_mentions),
            kind=AlertKind.CREDENTIALS,
        )

        def post() -> Proof:
            ref = self.alerter.alert(alert)
            return Proof(ref.ts, {"channel": ref.channel, "ts": ref.ts})

        key = credential_alert_key(proof.target, hour)
        spec = EffectSpec(key, "", EffectStep.ALERT, {"target": proof.target}, ALERT_LEASE)
        return 1 if self.ledger.perform(spec, post).happened else 0

    def _settle_once(self, receipt: EffectRow, due: Due, now: datetime) -> int:
        target = due.publisher.target
        result = receipt_result(receipt)
        ref = MessageRef(channel=str(result["channel"]), ts=str(result["ts"]))
        alert = RunAlert(
            run_id="",
            recipe=due.recipe.name,
            headline=f"Settled: the credentials of `{target}` are accepted again.",
            facts=[f"Proved at {now:%Y-%m-%d %H:%M} UTC."],
            mentions=[],
            kind=AlertKind.CREDENTIALS,
        )

        def rewrite() -> Proof:
            self.alerter.settle(ref, alert)
            return Proof(ref.ts)

        settled = alert_settled_key(receipt.key)
        spec = EffectSpec(
            settled, "", EffectStep.ALERT_SETTLED, {"alert": receipt.key}, ALERT_LEASE
        )
        return 1 if self.ledger.perform(spec, rewrite, repeatable=True).happened else 0

    def _expiry_once(self, expiry: KnownExpiry, now: datetime) -> int:
        """A token's known expiry, alerted once when TOKEN_WARN_DAYS or fewer are left."""
        if expiry.expires is None or not expiry.due(now.date()):
            return 0
        key = expiry_alert_key(expiry.target, expiry.expires)
        existing = self.ledger.get(key)
        if existing is not None and existing.state != EffectState.FAILED:
            return 0
        recipe = next(
            r.name for r in self.config.recipes.values() if expiry.target in _targets_of(r)
        )
        alert = RunAlert(
            run_id="",
            recipe=recipe,
            headline=f"A token is about to expire: {expiry.text(now.date())}.",
            facts=[
                f"Fix: mint a new token, set {expiry.secret_env} to it and {expiry.variable} "
                "to its expiry date, then restart Galley.",
                "Posts to it fail from that day until then.",
            ],
            mentions=list(self.config.slack.alert_mentions),
            kind=AlertKind.CREDENTIALS,
        )

        def post() -> Proof:
            ref = self.alerter.alert(alert)
            return Proof(ref.ts, {"channel": ref.channel, "ts": ref.ts})

        payload = {"target": expiry.target, "expires": expiry.expires.isoformat()}
        spec = EffectSpec(key, "", EffectStep.ALERT, payload, ALERT_LEASE)
        return 1 if self.ledger.perform(spec, post).happened else 0


def _targets_of(recipe: Recipe) -> set[str]:
    return {t.target for t in recipe.targets}


def fix_of(recipe: Recipe, target: str) -> str:
    """What to do about a refused target: the variable its secret is read from."""
    for spec in recipe.targets:
        secret_env = getattr(spec, "secret_env", None)
        if spec.target == target and secret_env:
            return f"set {secret_env} to a credential the service accepts, then restart Galley."
    return f"check the credentials Galley uses for {target}."


def receipt_result(receipt: EffectRow) -> dict[str, object]:
    found = json.loads(receipt.result or "{}")
    return found if isinstance(found, dict) else {}


def _sooner(slot_at: datetime, than: datetime | None) -> bool:
    return than is None or slot_at < than


def _when_next(due: Due) -> str:
    if due.slot_at is None:
        return "still refused"
    return f"the next post to it is due at {due.slot_at:%Y-%m-%d %H:%M} UTC"
