"""Uncertain and stuck runs are told to people (DESIGN.md §4.8): once per episode,
deduplicated by key across replicas, with reminders while nobody resolves them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import col, select

from core.config import Config
from core.effects import EffectDecision, EffectLedger
from core.errors import EffectInProgress, EffectNotSent, EffectOutcomeUnknown
from core.models import EffectRow, RunRow
from core.policies import FailReason
from core.ports import Alerter, Clock, RunAlert
from core.states import RunState
from core.store import Store

STUCK_RUNNING_LEASES = 2  # a run drafting for two claim leases is stuck
STUCK_PUBLISHING_CALLS = 10  # a run publishing for ten call timeouts is stuck
AUTH_REASONS = [
    FailReason.AUTH.value,
    FailReason.PUBLISH_AUTH.value,
]  # refusals people must hear about
ALERT_BATCH = 200  # runs one sweep reads of each kind
AUTH_WINDOW = timedelta(days=1)  # older refusals were told already, or predate this process


class AlertService:
    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock,
        ledger: EffectLedger,
        alerter: Alerter,
        reminder_every: timedelta,
    ) -> None:
        self.store, self.config, self.clock, self.ledger = store, config, clock, ledger
        self.alerter = alerter
        self.reminder_every = reminder_every

    def alert_run(self, run_id: str) -> bool:
        """Alert for a run now if it needs one; True when a message was posted."""
        with self.store.transaction() as session:
            run = session.exec(select(RunRow).where(col(RunRow.id) == run_id)).one()
        return self._alert_if_due(run, self.clock.now())

    def sweep(self) -> int:
        """The periodic pass: first alerts missed by a crash, reminders, stuck runs."""
        now = self.clock.now()
        watched = col(RunRow.state).in_([RunState.UNCERTAIN, RunState.RUNNING, RunState.PUBLISHING])
        refused = (col(RunRow.state) == RunState.FAILED) & col(RunRow.reason).in_(AUTH_REASONS)
        recent = col(RunRow.updated_at) > now - AUTH_WINDOW
        with self.store.read() as session:  # two index reads: open runs, then the last day
            runs = [
                *session.exec(select(RunRow).where(watched).limit(ALERT_BATCH)).all(),
                *session.exec(select(RunRow).where(recent, refused).limit(ALERT_BATCH)).all(),
            ]
        return sum(self._alert_if_due(run, now) for run in runs)

    def _alert_if_due(self, run: RunRow, now: datetime) -> bool:
        headline = self._headline(run, now)
        if headline is None:
            return False
        episode = f"alert|{run.id}|{run.state}|{run.updated_at.isoformat()}"
        reminders = int((now - run.updated_at) / self.reminder_every)
        key = episode if reminders == 0 else f"{episode}|reminder:{reminders}"
        if run.state == RunState.FAILED:
            reminders = 0  # a refusal is told once; it is not waiting on anyone's answer
        if reminders:
            headline = f"Reminder: {headline}"
        return self._post_once(key, run, headline)

    def _headline(self, run: RunRow, now: datetime) -> str | None:
        recipe = self.config.recipes.get(run.recipe)
        if run.state == RunState.UNCERTAIN:
            return "Galley cannot tell whether this was published."
        if run.state == RunState.FAILED and run.reason == FailReason.AUTH:
            return "Anthropic refused Galley's API key (401/403): drafting needs a person."
        if run.state == RunState.FAILED and run.reason == FailReason.PUBLISH_AUTH:
            return "The destination refused Galley's credentials (401/403): nothing was published."
        if recipe is None:
            return None
        age = now - run.updated_at
        if run.state == RunState.RUNNING and age > recipe.claim_lease * STUCK_RUNNING_LEASES:
            return f"Drafting has been running for {_minutes(age)}."
        if run.state == RunState.PUBLISHING and age > recipe.call_timeout * STUCK_PUBLISHING_CALLS:
            return f"Publishing has been in progress for {_minutes(age)}."
        return None

    def _post_once(self, key: str, run: RunRow, headline: str) -> bool:
        try:
            start = self.ledger.begin(
                key,
                draft_key=run.draft_key or "",
                step="alert",
                payload={"run": run.id},
                lease=timedelta(minutes=5),
                run_id=run.id,
            )
        except EffectInProgress:
            return False
        if start.decision != EffectDecision.ACT:
            return False  # posted already, or unknown: a second ping is worse than none
        alert = RunAlert(
            run_id=run.id,
            recipe=run.recipe,
            headline=headline,
            facts=self._facts(run),
            mentions=list(self.config.slack.alert_mentions),
        )
        try:
            ref = self.alerter.alert(alert)
        except EffectNotSent as exc:
            self.ledger.fail(key, str(exc), run_id=run.id)  # try again on the next pass
            return False
        except EffectOutcomeUnknown as exc:
            self.ledger.mark_uncertain(key, str(exc), run_id=run.id)  # may have pinged
            return False
        self.ledger.succeed(key, ref.ts, {"channel": ref.channel, "ts": ref.ts}, run_id=run.id)
        return True

    def _facts(self, run: RunRow) -> list[str]:
        facts = [f"Run `{run.id}` is `{run.state}` since {run.updated_at:%Y-%m-%d %H:%M} UTC."]
        if run.draft_key is None:
            return facts
        with self.store.transaction() as session:
            effects = session.exec(
                select(EffectRow)
                .where(col(EffectRow.draft_key) == run.draft_key, col(EffectRow.step) == "publish")
                .order_by(col(EffectRow.created_at))
            ).all()
        for effect in effects:
            facts.append(
                f"`{effect.key}`: tried {effect.tries} time(s) since "
                f"{effect.created_at:%Y-%m-%d %H:%M} UTC; last known: {effect.state}"
                + (f" ({effect.detail})" if effect.detail else "")
            )
        return facts


def _minutes(delta: timedelta) -> str:
    return f"{int(delta.total_seconds() // 60)} minutes"
