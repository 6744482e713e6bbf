"""The database gauges of `/metrics`: the review queue per recipe, drafts by live state,
uncertain and stuck runs, read from the shared database at scrape time so every replica
reports the same truth. The bot registers them at start (`watch_database`), never import.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

import sqlalchemy as sa
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlmodel import col, select

from core.drafting.batch_queue import waiting_by_recipe
from core.errors import GalleyError
from core.models import DraftRow, RunRow
from core.operations.stuck import stuck_condition
from core.ports import Clock
from core.setup.config import Config
from core.states import DRAFT_LIVE_STATES, DraftState, RunState
from core.store.engine import Store
from core.store.history_pages import ready_counts

log = logging.getLogger(__name__)


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
            in_batch = waiting_by_recipe(session)
            stuck = session.exec(
                select(count).select_from(RunRow).where(stuck_condition(config, clock.now()))
            ).one()
        waiting = GaugeMetricFamily(
            "galley_drafts_waiting_in_batch",
            "Drafts whose model answer waits in a Message Batch, by recipe.",
            labels=["recipe"],
        )
        for name in config.recipes:
            queue.add_metric([name], ready.get(name, 0))
            waiting.add_metric([name], in_batch.get(name, 0))
        for state in DraftState:
            if state in DRAFT_LIVE_STATES:
                drafts.add_metric([state], by_state.get(state, 0))
        return [
            queue,
            drafts,
            waiting,
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
