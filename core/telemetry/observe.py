"""What Galley tells an operator about its own work: one log line and the matching
metrics for each state change, model call and Slack call (core/telemetry/metrics.py names them).

A state change is told only once its transaction has committed, so the log and the
counters never show a change that was rolled back. Nothing here may raise into the
caller: a broken log handler must not break a transition. prometheus_client (and
core/telemetry/metrics.py with it) loads on the first thing told, so a CLI command that changes
nothing never pays for it; core/telemetry/metrics.py imports nothing that imports this module.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, SessionTransaction

from core.drafting_policies import Drafting
from core.identity import is_run_id, recipe_of_run, run_of_key
from core.models import RunRow
from core.policies import EffectStep, FailReason, SkipReason, is_takeover_note
from core.ports import DraftRequest, ModelReply
from core.states import (
    EFFECT_OUTCOME_STATES,
    RUN_FINAL_STATES,
    DraftState,
    EventSubject,
    RunState,
    is_version_state,
)
from core.telemetry.pricing import reply_cost_usd

state_log = logging.getLogger("galley.state")
model_log = logging.getLogger("galley.model")
slack_log = logging.getLogger("galley.slack")

_PENDING = "galley_state_changes"
# Runs finished, as the counter counts them: an uncertain run's work is over too, and what
# is left is a person's.
FINISHED_RUN_STATES = RUN_FINAL_STATES | {RunState.UNCERTAIN}
_REASONS = frozenset(SkipReason) | frozenset(FailReason)


@dataclass(frozen=True)
class StateChange:
    subject: EventSubject
    subject_id: str
    run_id: str | None
    from_state: str | None
    to_state: str
    actor: str
    reason: str | None
    run_reason: str | None  # the run's stored reason (an enum value) when it is a run
    step: str | None = None  # an effect's stored step (`effects.step`) when it is an effect


def state_changed(
    session: Session,
    *,
    subject: EventSubject,
    subject_id: str,
    run_id: str | None,
    from_state: str | None,
    to_state: str,
    actor: str,
    reason: str | None,
    run_reason: str | None = None,
    step: str | None = None,
) -> None:
    """Called for every event row; told (logged and counted) when the session commits.
    `run_reason` is the run's stored reason; without it, it is read from the session.
    `step` is an effect's stored step: what it was for is read there, never from its key."""
    if subject == EventSubject.RUN and run_reason is None:
        run = session.identity_map.get(sa.orm.util.identity_key(RunRow, subject_id))
        run_reason = getattr(run, "reason", None)
    change = StateChange(
        subject,
        subject_id,
        run_id,
        None if from_state is None else str(from_state),
        str(to_state),
        actor,
        reason,
        run_reason,
        None if step is None else str(step),
    )
    session.info.setdefault(_PENDING, []).append(change)


@sa.event.listens_for(Session, "after_commit")
def _tell_committed(session: Session) -> None:
    for change in session.info.pop(_PENDING, []):
        try:
            _tell(change)
        except Exception:  # never let telling break the work
            state_log.exception("could not record a state change")


@sa.event.listens_for(Session, "after_transaction_end")
def _forget_rolled_back(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        session.info.pop(_PENDING, None)


def _tell(change: StateChange) -> None:
    recipe = recipe_of(change)
    # vars, not asdict: every field is flat, and asdict's deep copy cost more than the rest
    fields = dict(vars(change)) | {"event": "state_change", "recipe": recipe}
    fields.pop("run_reason")
    fields.pop("step")
    if change.subject == EventSubject.DRAFT:
        fields["draft_key"] = change.subject_id
    why = f" ({change.reason})" if change.reason else ""
    state_log.info(
        "%s %s: %s -> %s%s by %s",
        change.subject,
        change.subject_id,
        change.from_state or "new",
        change.to_state,
        why,
        change.actor,
        extra={"galley": fields},
    )
    _count(change, recipe)


def _metrics() -> ModuleType:
    from core.telemetry import metrics

    return metrics


def _count(change: StateChange, recipe: str) -> None:
    metrics = _metrics()
    to_state = change.to_state
    if change.subject == EventSubject.RECIPE and is_version_state(to_state):
        to_state = "bumped"  # a new version: one series, not one per version
    metrics.STATE_CHANGES.labels(change.subject, to_state).inc()
    if change.subject == EventSubject.RUN and to_state in FINISHED_RUN_STATES:
        reason = change.run_reason if change.run_reason in _REASONS else ""
        metrics.RUNS_FINISHED.labels(recipe, to_state, reason).inc()
    elif change.subject == EventSubject.DRAFT:
        if to_state in set(DraftState):
            metrics.DRAFT_TRANSITIONS.labels(recipe, to_state).inc()
        taken_over = is_takeover_note(change.reason)
        if change.from_state == change.to_state == DraftState.CLAIMED and taken_over:
            metrics.CLAIM_TAKEOVERS.labels(recipe).inc()
    elif change.subject == EventSubject.EFFECT and to_state in EFFECT_OUTCOME_STATES:
        if change.step == EffectStep.PUBLISH:
            metrics.PUBLICATIONS.labels(recipe, to_state).inc()
        elif change.step == EffectStep.ALERT:  # not its settle rewrite: that is no alert
            metrics.ALERTS.labels(to_state).inc()


def recipe_of(change: StateChange) -> str:
    """The recipe a change belongs to ("" when it belongs to none, like the digest)."""
    if change.subject == EventSubject.RECIPE:
        return change.subject_id
    run = change.run_id
    if run is None and change.subject in (EventSubject.DRAFT, EventSubject.EFFECT):
        run = run_of_key(change.subject_id)
    if run is None and change.subject == EventSubject.RUN:
        run = change.subject_id
    return "" if run is None or not is_run_id(run) else recipe_of_run(run)


def batch_entry_ended(
    recipe: str, result: str, waited_s: float | None, reply: ModelReply | None = None
) -> None:
    """One entry of an ended batch: its result, how long it waited, and (answered) its
    tokens and cost at the batch price, in the same series as synchronous calls."""
    metrics = _metrics()
    metrics.BATCH_ENTRIES.labels(recipe, result).inc()
    if waited_s is not None:
        metrics.BATCH_WAIT.observe(waited_s)
    if reply is None:
        return
    for kind, count in _tokens(reply).items():
        metrics.MODEL_TOKENS.labels(recipe, kind).inc(count)
    metrics.MODEL_COST.labels(recipe).inc(reply_cost_usd(reply, Drafting.BATCH))


def _tokens(reply: ModelReply) -> dict[str, int]:
    return {
        "input": reply.input_tokens,
        "output": reply.output_tokens,
        "cache_creation": reply.cache_creation_tokens,
        "cache_read": reply.cache_read_tokens,
    }


def model_called(
    request: DraftRequest,
    outcome: str,
    seconds: float,
    reply: ModelReply | None = None,
    *,
    before_send: float = 0.0,
) -> None:
    """One model call: a log line (outcome, latency from sending, the time spent before
    sending, tokens) and its metrics."""
    recipe = request.recipe
    model = reply.model if reply is not None else request.model
    fields: dict[str, Any] = {
        "event": "model_call",
        "recipe": recipe,
        "model": model,
        "outcome": outcome,
        "latency_s": round(seconds, 3),
        "before_send_s": round(before_send, 3),
    }
    metrics = _metrics()
    metrics.MODEL_CALLS.labels(recipe, request.model, outcome).inc()
    metrics.MODEL_LATENCY.labels(outcome).observe(seconds)
    if reply is not None:
        tokens = _tokens(reply)
        for kind, count in tokens.items():
            metrics.MODEL_TOKENS.labels(recipe, kind).inc(count)
        cost = estimated_cost(reply)
        metrics.MODEL_COST.labels(recipe).inc(cost)
        fields |= {"request_id": reply.request_id, "cost_usd": round(cost, 6)}
        fields |= {f"{kind}_tokens": count for kind, count in tokens.items()}
    model_log.info(
        "model call for %s: %s in %.2fs%s%s",
        recipe or "?",
        outcome,
        seconds,
        f" ({reply.input_tokens} in / {reply.output_tokens} out tokens)" if reply else "",
        f"; {before_send:.2f}s spent before sending" if before_send >= 0.05 else "",
        extra={"galley": fields},
    )


def estimated_cost(reply: ModelReply) -> float:
    """US dollars at list prices for the model's family (an estimate, never billed): the
    one table in core/telemetry/pricing.py, so /metrics and the ledger's figures agree."""
    return reply_cost_usd(reply)


def slack_counted(method: str, outcome: str) -> None:
    """One Slack Web API call, by method and outcome (ok, rate_limited, refused, ...)."""
    _metrics().SLACK_CALLS.labels(method, outcome).inc()


def slack_logged(method: str, outcome: str, **fields: Any) -> None:
    """A log line for a Slack post or update: where, how it ended, the message ts."""
    where = fields.get("channel", "?")
    ts = f" ts={fields['ts']}" if fields.get("ts") else ""
    slack_log.info(
        "slack %s to %s: %s%s",
        method,
        where,
        outcome,
        ts,
        extra={"galley": {"event": "slack_call", "method": method, "outcome": outcome} | fields},
    )
