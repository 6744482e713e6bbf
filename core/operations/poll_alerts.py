"""An items recipe whose source cannot be read is told to people (docs/design.md §29):
once per failing episode, when the failure will not fix itself or has lasted, and the
alert is settled once a poll reads the source again. Deduplicated by key across
replicas through the effect ledger; never reads a source, never touches a run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.errors import GalleyError
from core.identity import alert_settled_key, poll_alert_key
from core.models import ItemPollRow
from core.operations.alert_posts import AlertPost, AlertSettle
from core.policies import AlertKind, EffectStep
from core.ports import Alerter, Clock, MessageRef, RunAlert
from core.setup.config import Config
from core.sources.poll_health import (
    FAILING_ALERTED,
    FAILURES_ALERTED,
    is_alert_due,
    polls_to_tell,
)
from core.states import EffectState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.receipts import EffectSpec

log = logging.getLogger("galley.alerts")
ALERT_LEASE = timedelta(minutes=5)


@dataclass(eq=False)  # a service: compared and hashed by identity
class PollAlerts:
    store: Store
    config: Config
    clock: Clock
    ledger: EffectLedger
    alerter: Alerter

    def sweep(self, recipe: str | None = None) -> int:
        """Alerts due and settlements due, for every items recipe (or just `recipe`)."""
        now = self.clock.now()
        with self.store.read() as session:
            rows = [r for r in polls_to_tell(session) if recipe in (None, r.recipe)]
        told = 0
        for row in rows:
            if is_alert_due(row, now):
                told += self._alert_once(row)
            if row.ended_since is not None:
                told += self._settle_once(row)
        return told

    def tell(self, recipe: str) -> None:
        """Right after a poll: what its outcome makes due. A failure to tell is left to
        the next pass, never the poll's failure."""
        try:
            self.sweep(recipe)
        except GalleyError:
            log.exception("poll alerts of %s: left to the next pass", recipe)

    def _alert_once(self, row: ItemPollRow) -> int:
        assert row.failing_since is not None
        key = poll_alert_key(row.recipe, row.failing_since)
        existing = self.ledger.get(key)
        if existing is not None and existing.state != EffectState.FAILED:
            return 0
        alert = RunAlert(
            run_id="",
            recipe=row.recipe,
            headline=_headline(row),
            facts=_facts(row),
            mentions=list(self.config.slack.alert_mentions),
            kind=AlertKind.POLL_FAILING,
        )

        spec = EffectSpec(
            key, "", EffectStep.ALERT, _payload(row.recipe, row.failing_since), ALERT_LEASE
        )
        return 1 if self.ledger.perform(spec, AlertPost(self.alerter, alert).act).happened else 0

    def _settle_once(self, row: ItemPollRow) -> int:
        """The ended episode's alert, if one was posted, rewritten to say polls read again."""
        assert row.ended_since is not None
        key = poll_alert_key(row.recipe, row.ended_since)
        receipt = self.ledger.get(key)
        if receipt is None or receipt.state != EffectState.SUCCEEDED or not receipt.result:
            return 0  # never told: nothing to settle
        settled = alert_settled_key(key)
        if self.ledger.get(settled) is not None:
            return 0
        ref = MessageRef(channel=str(receipt.result["channel"]), ts=str(receipt.result["ts"]))
        alert = RunAlert(
            run_id="",
            recipe=row.recipe,
            headline=f"Settled: polls of `{row.recipe}` read its source again.",
            facts=[
                f"Failing since {_when(row.ended_since)}; read again by {_when(row.polled_at)}."
            ],
            mentions=[],
            kind=AlertKind.POLL_FAILING,
        )

        payload = {"alert": key}
        spec = EffectSpec(settled, "", EffectStep.ALERT_SETTLED, payload, ALERT_LEASE)
        settle = AlertSettle(self.alerter, ref, alert)
        return 1 if self.ledger.perform(spec, settle.act, repeatable=True).happened else 0


def _headline(row: ItemPollRow) -> str:
    if row.lasting:
        return (
            f"The source of `{row.recipe}` refused Galley's polls: no new item is drafted "
            "until someone fixes it."
        )
    return (
        f"The source of `{row.recipe}` has not been read for {row.failures} polls in a row: "
        "no new item is drafted while it fails."
    )


def _facts(row: ItemPollRow) -> list[str]:
    assert row.failing_since is not None
    return [
        f"Latest answer: {row.detail}",
        f"Failing since {_when(row.failing_since)} ({row.failures} failed poll(s)); "
        f"told after a failure waiting cannot fix, {FAILURES_ALERTED} failed polls or "
        f"{FAILING_ALERTED} of failing.",
        "Galley keeps polling; nothing is lost meanwhile, and this alert is settled when a "
        "poll reads the source again. `galley sources RECIPE` reads it now.",
    ]


def _payload(recipe: str, since: datetime) -> dict[str, str]:
    return {"recipe": recipe, "failing_since": since.isoformat()}


def _when(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M} UTC"
