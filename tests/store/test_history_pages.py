"""`galley runs` pages through history by an indexed key, newest slot first, and
`status` answers from indexed counts. Both backends, on a seeded history."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from bench.history_seed import config_text, load, recipe_name
from core.api.galley import Galley
from core.api.home import read_home
from core.api.services import Services
from core.drafting.gate import ready_count
from core.errors import UnknownRun
from core.operations.gauges import DatabaseGauges
from core.setup.config import parse_config
from core.states import RunState
from core.store.engine import Store
from core.store.history_pages import ready_counts
from core.testing import FrozenClock


@pytest.fixture
def services(store: Store) -> Services:
    load(store, 600, recipes=3)
    return Services(parse_config(config_text(recipes=3)), store, clock=FrozenClock())


@pytest.fixture
def galley(services: Services) -> Galley:
    return Galley.over(services)


def _all_ids(store: Store, where: str = "") -> list[str]:
    with store.engine.connect() as connection:
        query = f"SELECT id FROM runs {where} ORDER BY slot_at DESC, id DESC"
        return [row[0] for row in connection.exec_driver_sql(query)]


def test_pages_follow_each_other_without_gaps_or_repeats(
    galley: Galley, services: Services
) -> None:
    seen: list[str] = []
    before = None
    while True:
        page = galley.runs(limit=97, before=before)
        seen += [r.id for r in page]
        if len(page) < 97:
            break
        before = page[-1].id
    assert seen == _all_ids(services.store)
    assert len(seen) == 600


def test_a_state_pages_within_that_state(galley: Galley, services: Services) -> None:
    first = galley.runs(RunState.SUCCEEDED, limit=10)
    second = galley.runs(RunState.SUCCEEDED, limit=10, before=first[-1].id)
    expected = _all_ids(services.store, "WHERE state = 'succeeded'")[:20]
    assert [r.id for r in first + second] == expected
    assert {r.attempts for r in first + second} == {1}


def test_an_unknown_page_start_is_refused(galley: Galley) -> None:
    with pytest.raises(UnknownRun):
        galley.runs(before="no-such-recipe@2026-01-01T00:00")


def test_status_counts_each_recipes_waiting_drafts(galley: Galley, services: Services) -> None:
    stuck = _all_ids(services.store, f"WHERE recipe = '{recipe_name(2)}'")[5]
    with services.store.engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE runs SET state = 'uncertain' WHERE id = :id"), {"id": stuck}
        )
    report = galley.status()
    assert {r.name: r.pending for r in report.recipes} == {recipe_name(i): 2 for i in range(3)}
    assert report.uncertain == [stuck]


def test_every_count_of_the_review_queue_is_ready_counts(
    galley: Galley, services: Services
) -> None:
    """Backpressure notices (the gate's count), status, the Home tab and the queue-depth
    gauge all count the same `ready` drafts per recipe."""
    with services.store.engine.begin() as connection:  # recipe 0 gets one more than the others
        connection.exec_driver_sql(
            "UPDATE drafts SET state = 'ready' WHERE key = (SELECT MIN(key) FROM drafts"
            f" WHERE recipe = '{recipe_name(0)}' AND state <> 'ready')"
        )
        raw = dict(
            connection.exec_driver_sql(
                "SELECT recipe, COUNT(*) FROM drafts WHERE state = 'ready' GROUP BY recipe"
            ).all()
        )
    names = list(services.config.recipes)
    with services.store.read() as session:
        counts = ready_counts(session)
        gate = {name: ready_count(session, name) for name in names}
        assert ready_counts(session, names[:1]) == {names[0]: raw[names[0]]}
    gauges = DatabaseGauges()
    gauges.watch(services.store, services.config, services.clock)
    [depth] = [f for f in gauges.collect() if f.name == "galley_review_queue_depth"]

    assert counts == raw and raw[names[0]] == raw[names[1]] + 1
    assert gate == counts
    assert {r.name: r.pending for r in galley.status().recipes} == counts
    assert read_home(services).waiting_total == sum(counts.values())
    assert {s.labels["recipe"]: s.value for s in depth.samples} == counts
