"""`galley runs` pages through history by an indexed key, newest slot first, and
`status` answers from indexed counts (issue 14). Both backends, on a seeded history."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from bench.history_seed import config_text, load, recipe_name
from core.config import parse_config
from core.errors import UnknownRun
from core.operator import Galley
from core.states import RunState
from core.store import Store
from core.testing import FrozenClock


@pytest.fixture
def galley(store: Store) -> Galley:
    load(store, 600, recipes=3)
    return Galley(parse_config(config_text(recipes=3)), store, clock=FrozenClock())


def _all_ids(store: Store, where: str = "") -> list[str]:
    with store.engine.connect() as connection:
        query = f"SELECT id FROM runs {where} ORDER BY slot_at DESC, id DESC"
        return [row[0] for row in connection.exec_driver_sql(query)]


def test_pages_follow_each_other_without_gaps_or_repeats(galley: Galley) -> None:
    seen: list[str] = []
    before = None
    while True:
        page = galley.runs(limit=97, before=before)
        seen += [r.id for r in page]
        if len(page) < 97:
            break
        before = page[-1].id
    assert seen == _all_ids(galley.store)
    assert len(seen) == 600


def test_a_state_pages_within_that_state(galley: Galley) -> None:
    first = galley.runs(RunState.SUCCEEDED, limit=10)
    second = galley.runs(RunState.SUCCEEDED, limit=10, before=first[-1].id)
    expected = _all_ids(galley.store, "WHERE state = 'succeeded'")[:20]
    assert [r.id for r in first + second] == expected
    assert {r.attempts for r in first + second} == {1}


def test_an_unknown_page_start_is_refused(galley: Galley) -> None:
    with pytest.raises(UnknownRun):
        galley.runs(before="no-such-recipe@2026-01-01T00:00")


def test_status_counts_each_recipes_waiting_drafts(galley: Galley) -> None:
    stuck = _all_ids(galley.store, f"WHERE recipe = '{recipe_name(2)}'")[5]
    with galley.store.engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE runs SET state = 'uncertain' WHERE id = :id"), {"id": stuck}
        )
    report = galley.status()
    assert {r.name: r.pending for r in report.recipes} == {recipe_name(i): 2 for i in range(3)}
    assert report.uncertain == [stuck]
