"""Runs people must settle are told to them (docs/design.md §12): uncertain, stuck, failed,
or stranded (approved with nothing left to publish it), and review posts nobody can
find. Once per episode, deduplicated by key across replicas, with reminders while an
uncertain or stuck run waits on someone; a failure is told once, with its cause.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from core.drafting.attempts import model_calls_of_run
from core.drafting.causes import last_attempt_cause
from core.identity import (
    POST_GONE,
    REVIEW_GONE,
    REVIEW_POST,
    REVIEW_POST_ALERT,
    SETTLED_SUFFIX,
    alert_key,
    alert_settled_key,
    draft_alert_key,
    is_reminder_key,
    parse_alert_key,
    reminder_key,
    target_of_publish_key,
)
from core.models import EffectRow, EventRow, RunRow
from core.operations.alert_posts import AlertPost, AlertSettle
from core.operations.stuck import is_stuck
from core.policies import AlertKind, EffectStep, FailReason
from core.ports import Alerter, Clock, MessageRef, ReviewItem, RunAlert
from core.publishing.lost_answers import sweep_alert_due
from core.publishing.target_outcomes import (
    ReceiptFacts,
    TargetOutcome,
    outcomes_sentence,
    target_outcomes,
)
from core.publishing.targets import public_url
from core.setup.config import Config
from core.spoken import spoken_duration
from core.states import (
    RUN_PUBLISHABLE_STATES,
    RUN_WATCHED_STATES,
    EffectState,
    EventSubject,
    RunState,
)
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.leases import is_person
from core.store.receipts import EffectSpec
from core.store.rows import required, run_row

FAILED_WINDOW = timedelta(days=1)  # older failures were told already, or predate this process
WATCHED = RUN_WATCHED_STATES | {RunState.APPROVED}  # approved: stranded when nothing publishes
ALERT_BATCH = 200  # runs one sweep reads of each kind


@dataclass(eq=False)  # a service: compared and hashed by identity
class AlertService:
    store: Store
    config: Config
    clock: Clock
    ledger: EffectLedger
    alerter: Alerter
    reminder_every: timedelta

    def alert_run(self, run_id: str) -> bool:
        """Alert for a run now if it needs one; True when a message was posted."""
        with self.store.read() as session:
            run = required(run_row(session, run_id), f"run {run_id}")
        return self._alert_if_due(run, self.clock.now(), swept=False)

    def sweep(self) -> int:
        """The periodic pass: first alerts missed by a crash, reminders, stuck, failed
        and stranded runs."""
        now = self.clock.now()
        watched = col(RunRow.state).in_(WATCHED)
        failed = (col(RunRow.state) == RunState.FAILED) & (
            col(RunRow.updated_at) > now - FAILED_WINDOW
        )
        with self.store.read() as session:  # two index reads: open runs, then the last day
            runs = [
                *session.exec(select(RunRow).where(watched).limit(ALERT_BATCH)).all(),
                *session.exec(select(RunRow).where(failed).limit(ALERT_BATCH)).all(),
            ]
            keys = {run.id: self._alert_key(run, now) for run in runs}
            told = _already_told(session, list(keys.values()))
        due = [run for run in runs if keys[run.id] not in told]
        return sum(self._alert_if_due(run, now, swept=True) for run in due)

    def settle_resolved(self) -> int:
        """Alerts whose run has since moved on (retried and drafted, published, cancelled,
        skipped) are rewritten to say so, once each; their buttons go. Only alerts of the
        last FAILED_WINDOW are looked at: older ones were settled or are history."""
        now = self.clock.now()
        marker = aliased(EffectRow)
        already = sa.exists().where(col(marker.key) == col(EffectRow.key).concat(SETTLED_SUFFIX))
        with self.store.read() as session:  # ix_effects_alerts_posted: the last day's alerts
            posted = session.exec(
                select(EffectRow).where(
                    col(EffectRow.step) == EffectStep.ALERT,
                    col(EffectRow.state) == EffectState.SUCCEEDED,
                    col(EffectRow.created_at) > now - FAILED_WINDOW,
                    col(EffectRow.key).not_like(f"{REVIEW_POST_ALERT}%"),
                    ~already,
                )
            ).all()
            alerted = [(e, *parse_alert_key(e.key)) for e in posted]
            runs = {
                r.id: r
                for r in session.exec(
                    select(RunRow).where(col(RunRow.id).in_({run_id for _, run_id, _ in alerted}))
                ).all()
            }
        settled = 0
        for receipt, run_id, alerted_state in alerted:
            run = runs.get(run_id)
            if run is None or run.state == alerted_state or not receipt.result:
                continue
            settled += self._settle_once(receipt, run)
        return settled

    def _settle_once(self, receipt: EffectRow, run: RunRow) -> int:
        ref = MessageRef(**json.loads(receipt.result or "{}"))
        spec = EffectSpec(
            alert_settled_key(receipt.key),
            draft_key=run.draft_key or "",
            step=EffectStep.ALERT_SETTLED,
            payload={"alert": receipt.key},
            lease=timedelta(minutes=5),
            run_id=run.id,
        )
        if self.ledger.get(spec.key) is not None:
            return 0
        with self.store.read() as session:
            actors = session.exec(
                select(EventRow.actor)
                .where(
                    col(EventRow.subject) == EventSubject.RUN, col(EventRow.subject_id) == run.id
                )
                .order_by(col(EventRow.id).desc())
                .limit(20)  # the person who moved it on, not the worker that finished it
            ).all()
        moved_by = next((a for a in actors if is_person(a)), None)
        alert = RunAlert(
            run_id=run.id,
            recipe=run.recipe,
            headline=f"Settled: run `{run.id}` is now {run.state}.",
            facts=[f"At {run.updated_at:%Y-%m-%d %H:%M} UTC" + _why(run)],
            mentions=[],
            settled_by=moved_by or "",
        )

        settle = AlertSettle(self.alerter, ref, alert)
        return 1 if self.ledger.perform(spec, settle.act, repeatable=True).happened else 0

    def alert_review_post(self, item: ReviewItem, why: str) -> bool:
        """A review post whose outcome is unknown and that no lookup can find or rule out:
        nothing else will settle it, so people are told (once per draft)."""
        with self.store.read() as session:
            run = required(run_row(session, item.run_id), f"run {item.run_id}")
        facts = [
            f"Draft `{item.draft_key}` of run `{item.run_id}` may or may not be in the "
            "review channel; Galley cannot find it there.",
            f"Lookup: {why}",
            "If it is there, review it there. If not, review it with `galley show` or the "
            "notebook, or bump the recipe for a new draft.",
        ]
        headline = "A review message may have been posted, and Galley cannot find it."
        key = draft_alert_key(REVIEW_POST, item.draft_key)
        return self._post_once(key, run, headline, AlertKind.REVIEW_POST, facts)

    def alert_review_gone(self, item: ReviewItem, why: str) -> bool:
        """A review message deleted in the channel: its draft can no longer be decided
        there, so people are told where it can be (once per draft)."""
        with self.store.read() as session:
            run = required(run_row(session, item.run_id), f"run {item.run_id}")
        facts = [
            f"The review message of draft `{item.draft_key}` (run `{item.run_id}`) was "
            f"deleted in the channel; it now is `{item.state}`, and Galley stops updating it.",
            f"Slack: {why}",
            "Review or follow it with `galley show` or the notebook; bump the recipe for a "
            "new draft and message.",
        ]
        headline = "A review message was deleted, so Galley can no longer update it."
        key = draft_alert_key(REVIEW_GONE, item.draft_key)
        return self._post_once(key, run, headline, AlertKind.REVIEW_POST, facts)

    def alert_post_gone(self, receipt: str, run_id: str, headline: str, url: str | None) -> bool:
        """A publication read back and found gone (docs/design.md §28): told once per
        post, whoever reads it and however often."""
        with self.store.read() as session:
            run = required(run_row(session, run_id), f"run {run_id}")
        facts = [
            f"Run `{run_id}` was published to `{target_of_publish_key(receipt)}`"
            + (f" ({url})" if url else "")
            + "; reading it back, the platform says it is no longer there.",
            "Someone deleted it, or the platform removed it. Galley does not post it again.",
        ]
        key = draft_alert_key(POST_GONE, receipt)
        return self._post_once(key, run, headline, AlertKind.POST_GONE, facts)

    def _alert_if_due(self, run: RunRow, now: datetime, *, swept: bool) -> bool:
        """`swept`: found by the sweep, not sent by the pass that just looked."""
        found = self._headline(run, now, swept=swept)
        if found is None:
            return False
        headline, kind = found
        targets = self._target_outcomes(run)
        if targets:  # a recipe may publish to several: people see what became of each
            headline += f" {outcomes_sentence(targets)}"
        key = self._alert_key(run, now)
        if is_reminder_key(key):
            headline = f"Reminder: {headline}"
        return self._post_once(key, run, headline, kind)

    def _target_outcomes(self, run: RunRow) -> list[TargetOutcome]:
        """What became of each target tried for the run's draft (ix_effects_draft_key)."""
        if run.draft_key is None:
            return []
        with self.store.read() as session:
            receipts = session.exec(
                select(EffectRow)
                .where(
                    col(EffectRow.draft_key) == run.draft_key,
                    col(EffectRow.step) == EffectStep.PUBLISH,
                )
                .order_by(col(EffectRow.created_at), col(EffectRow.key))
            ).all()
        return target_outcomes(
            ReceiptFacts(r.key, r.state, r.detail, public_url(r.result)) for r in receipts
        )

    def _alert_key(self, run: RunRow, now: datetime) -> str:
        """One key per episode (the run's state since it entered it), and one per reminder
        while it lasts; a failure is told once: retrying it is a person's choice."""
        episode = alert_key(run.id, run.state, run.updated_at)
        reminders = int((now - run.updated_at) / self.reminder_every)
        if run.state == RunState.FAILED or reminders == 0:
            return episode
        return reminder_key(episode, reminders)

    def _headline(self, run: RunRow, now: datetime, *, swept: bool) -> tuple[str, AlertKind] | None:
        recipe = self.config.recipes.get(run.recipe)
        if run.state == RunState.UNCERTAIN:
            if swept and not sweep_alert_due(run, recipe, now):
                return None  # its lost answer is looked up first (docs/design.md §9)
            return "Galley cannot tell whether this was published.", AlertKind.PUBLISH
        if run.state == RunState.FAILED:
            return self._failure(run)
        if run.state in RUN_PUBLISHABLE_STATES and (recipe is None or recipe.publish is None):
            return (
                "This run is approved, and nothing will publish it: its recipe is no longer "
                "in the config, or has no publish target.",
                AlertKind.STRANDED,
            )
        if not is_stuck(run, self.config, now):
            return None
        age = spoken_duration(now - run.updated_at)
        if run.state == RunState.RUNNING:
            return f"Drafting has been running for {age}.", AlertKind.STRANDED
        return f"Publishing has been in progress for {age}.", AlertKind.PUBLISH

    def _failure(self, run: RunRow) -> tuple[str, AlertKind] | None:
        try:
            reason = FailReason(run.reason or "")
        except ValueError:
            return None
        if reason == FailReason.AUTH:
            return (
                "Anthropic refused Galley's API key (401/403): drafting needs a person.",
                AlertKind.DRAFTING,
            )
        if reason == FailReason.PUBLISH_AUTH:
            return (
                "A destination refused Galley's credentials (401/403).",
                AlertKind.PUBLISH,
            )
        if reason == FailReason.MISSED_SLOT:
            return (
                "An approved draft missed its time: nothing up to publish it by its slot plus "
                "publish_late, so it was not published late.",
                AlertKind.MISSED,
            )
        if reason == FailReason.PUBLISH_REJECTED:
            return "A destination refused the publication.", AlertKind.STRANDED
        with self.store.read() as session:
            if reason == FailReason.SOURCE_FAILED:  # no model call was made: say which source
                said = failure_said(session, run.id)
                return (
                    f"A required source could not be read: {said or reason.value}. "
                    "Retry reads it again.",
                    AlertKind.DRAFTING,
                )
            cause = last_attempt_cause(session, run.id)
        return f"Drafting failed: {cause or reason.value}.", AlertKind.DRAFTING

    def _post_once(
        self,
        key: str,
        run: RunRow,
        headline: str,
        kind: AlertKind,
        facts: list[str] | None = None,
    ) -> bool:
        """Posted once per key; an alert whose outcome is unknown is not sent again (a
        second ping is worse than none)."""
        spec = EffectSpec(
            key,
            draft_key=run.draft_key or "",
            step=EffectStep.ALERT,
            payload={"run": run.id},
            lease=timedelta(minutes=5),
            run_id=run.id,
        )
        existing = self.ledger.get(key)
        if existing is not None and existing.state != EffectState.FAILED:
            return False

        alert = RunAlert(
            run_id=run.id,
            recipe=run.recipe,
            headline=headline,
            facts=facts if facts is not None else self._facts(run),
            mentions=list(self.config.slack.alert_mentions),
            kind=kind,
        )
        return self.ledger.perform(spec, AlertPost(self.alerter, alert).act).happened

    def _facts(self, run: RunRow) -> list[str]:
        facts = [f"Run `{run.id}` is `{run.state}` since {run.updated_at:%Y-%m-%d %H:%M} UTC."]
        if run.state == RunState.FAILED:
            with self.store.read() as session:
                calls = session.execute(sa.select(model_calls_of_run(run.id))).scalar_one()
            facts.append(
                f"Model calls for this run, every draft and retry: {calls}. Reason: `{run.reason}`."
            )
        if run.draft_key is None:
            return facts
        with self.store.read() as session:
            effects = session.exec(
                select(EffectRow)
                .where(
                    col(EffectRow.draft_key) == run.draft_key,
                    col(EffectRow.step) == EffectStep.PUBLISH,
                )
                .order_by(col(EffectRow.created_at))
            ).all()
        for effect in effects:
            facts.append(
                f"`{effect.key}`: tried {effect.tries} time(s) since "
                f"{effect.created_at:%Y-%m-%d %H:%M} UTC; last known: {effect.state}"
                + (f" ({effect.detail})" if effect.detail else "")
            )
        return facts


def _already_told(session: Session, keys: list[str]) -> set[str]:
    """Of these alert keys, those posted or on their way (any receipt but a failed one):
    one read by primary key, so a pass over runs told long ago costs one query."""
    if not keys:
        return set()
    return set(
        session.exec(
            select(EffectRow.key).where(
                col(EffectRow.key).in_(keys), col(EffectRow.state) != EffectState.FAILED
            )
        ).all()
    )


def _why(run: RunRow) -> str:
    return f" ({run.reason})." if run.reason else "."


def failure_said(session: Session, run_id: str) -> str | None:
    """The sentence the run's move to `failed` was recorded with (its event's reason)."""
    return session.exec(
        select(EventRow.reason)
        .where(col(EventRow.run_id) == run_id, col(EventRow.to_state) == RunState.FAILED)
        .order_by(col(EventRow.id).desc())
        .limit(1)
    ).first()
