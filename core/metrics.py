"""Galley's own Prometheus metrics, all defined here so their names and labels are in
one place (served on `/metrics` by `galley run`). Label values are enum members or
recipe names, never free text, so the number of series stays bounded.

Counters count what this process saw happen; gauges that describe the database
(queue depth, uncertain and stuck runs) are read from it at scrape time, so every
replica reports the same shared truth.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

import sqlalchemy as sa
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlmodel import col, select

from core.config import Config
from core.errors import GalleyError
from core.history_pages import ready_counts
from core.models import DraftRow, RunRow
from core.ports import Clock
from core.states import DRAFT_LIVE_STATES, DraftState, RunState
from core.store import Store
from core.stuck import stuck_condition

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 3)

STATE_CHANGES = Counter(
    "galley_state_changes_total",
    "State changes recorded in the events table, by subject and target state.",
    ["subject", "to_state"],
)
RUNS_FINISHED = Counter(
    "galley_runs_finished_total",
    "Runs that reached a final state, by recipe, state and reason.",
    ["recipe", "state", "reason"],
)
DRAFT_TRANSITIONS = Counter(
    "galley_draft_transitions_total",
    "Drafts entering a state, by recipe and state.",
    ["recipe", "state"],
)
PUBLICATIONS = Counter(
    "galley_publications_total",
    "Publish effects that reached an outcome (succeeded, failed, uncertain).",
    ["recipe", "outcome"],
)
ALERTS = Counter(
    "galley_alerts_total",
    "Alert messages about a run, by outcome of the post.",
    ["outcome"],
)
CLAIM_TAKEOVERS = Counter(
    "galley_claim_takeovers_total",
    "Expired claims taken over by another worker, by recipe.",
    ["recipe"],
)
MODEL_CALLS = Counter(
    "galley_model_calls_total",
    "Model calls, by recipe, model and outcome (ok, not_sent, rejected_retryable, ...).",
    ["recipe", "model", "outcome"],
)
MODEL_LATENCY = Histogram(
    "galley_model_call_duration_seconds",
    "Wall time of one model call, whatever its outcome.",
    ["outcome"],
    buckets=LATENCY_BUCKETS,
)
MODEL_TOKENS = Counter(
    "galley_model_tokens_total",
    "Tokens billed, by recipe and kind (input, output, cache_creation, cache_read).",
    ["recipe", "kind"],
)
MODEL_COST = Counter(
    "galley_model_cost_usd_total",
    "Estimated model cost in US dollars, by recipe (list prices, see core/observe.py).",
    ["recipe"],
)
SLACK_CALLS = Counter(
    "galley_slack_calls_total",
    "Slack Web API calls, by method and outcome (ok, rate_limited, refused, "
    "unreachable, no_answer).",
    ["method", "outcome"],
)
SLACK_ACK_LATENCY = Histogram(
    "galley_slack_ack_duration_seconds",
    "Time from receiving a Slack request (HTTP or Socket Mode) to acknowledging it.",
    buckets=ACK_BUCKETS,
)
SCHEDULER_FIRES = Counter(
    "galley_scheduler_fires_total",
    "Recipe jobs fired by the scheduler, by recipe.",
    ["recipe"],
)
SCHEDULER_MISFIRES = Counter(
    "galley_scheduler_misfires_total",
    "Recipe fires the scheduler found past misfire_grace, by recipe.",
    ["recipe"],
)


class DatabaseGauges(Collector):
    """Gauges read from the shared database at scrape time: the review queue per recipe,
    drafts by (live) state, uncertain runs and stuck runs. `watch_database` registers the
    process's one instance when the bot starts, never at import."""

    def __init__(self) -> None:
        self._source: tuple[Store, Config, Clock] | None = None

    def watch(self, store: Store, config: Config, clock: Clock) -> None:
        self._source = (store, config, clock)

    def describe(self) -> Iterable[Metric]:
        return []  # collected on demand only: no database query at registration

    def collect(self) -> Iterable[Metric]:
        if self._source is None:
            return []
        try:
            return self._read(*self._source)
        except GalleyError as exc:  # database down: /readyz says so; scrape the rest
            log.warning("database gauges unavailable: %s", exc)
            return []

    def _read(self, store: Store, config: Config, clock: Clock) -> list[Metric]:
        queue = GaugeMetricFamily(
            "galley_review_queue_depth",
            "Drafts waiting for review (ready), by recipe; backpressure reads this.",
            labels=["recipe"],
        )
        drafts = GaugeMetricFamily(
            "galley_drafts", "Drafts in a live state, by state.", labels=["state"]
        )
        count = sa.func.count()
        with store.reachable(), store.transaction() as session:
            ready = ready_counts(session)
            by_state = dict(
                session.exec(
                    select(DraftRow.state, count)
                    .where(col(DraftRow.state).in_(DRAFT_LIVE_STATES))
                    .group_by(col(DraftRow.state))
                ).all()
            )
            uncertain = session.exec(
                select(count).where(col(RunRow.state) == RunState.UNCERTAIN)
            ).one()
            stuck = session.exec(
                select(count).select_from(RunRow).where(stuck_condition(config, clock.now()))
            ).one()
        for name in config.recipes:
            queue.add_metric([name], ready.get(name, 0))
        for state in DraftState:
            if state in DRAFT_LIVE_STATES:
                drafts.add_metric([state], by_state.get(state, 0))
        return [
            queue,
            drafts,
            GaugeMetricFamily(
                "galley_runs_uncertain", "Runs waiting for a person to settle them.", uncertain
            ),
            GaugeMetricFamily(
                "galley_runs_stuck", "Runs drafting or publishing past their deadline.", stuck
            ),
        ]


_GAUGES = DatabaseGauges()
_SERVED_BY: list[CollectorRegistry] = []  # the registries _GAUGES is registered in
_REGISTERING = threading.Lock()


def watch_database(
    store: Store, config: Config, clock: Clock, registry: CollectorRegistry = REGISTRY
) -> DatabaseGauges:
    """Serve the database gauges from this store: the process's one collector is
    registered the first time (a second bot in one process, as in tests, re-points it)."""
    with _REGISTERING:
        if not any(served is registry for served in _SERVED_BY):
            registry.register(_GAUGES)
            _SERVED_BY.append(registry)
        _GAUGES.watch(store, config, clock)
    return _GAUGES
