"""The publication calendar (docs/design.md §23): `galley calendar --json`, the
Home tab's "Coming up" and `g.calendar()` say what the runs table says, per recipe and
target, on a seeded history.

The CLI reads the real clock, so the history is seeded around it from the schedule's own
slots: the outcome does not depend on which day the test runs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from bot.cli import app
from core.api.galley import Galley
from core.api.services import Services
from core.models import DraftRow, EffectRow, RecipeRow, RunRow
from core.policies import ExpiryReason, SkipReason
from core.setup.config import Config, parse_config
from core.slots.schedule import Slot, slots_between
from core.states import DraftState, EffectState, RunState
from core.store.engine import Store
from core.testing import FrozenClock

CONFIG = """
[slack]
review_channel = "C0REVIEW"

[defaults]
timezone = "UTC"
draft_ahead = "1d"

[[recipes]]
name = "weekly-update"
platform = "linkedin"
schedule = "0 9 * * *"
prompt = "Write it."
publish = { to = "webhook", url = "https://hooks.example.test/galley" }

[[recipes]]
name = "tips"
platform = "blog"
schedule = "0 18 * * *"
prompt = "A tip."
"""
# per recipe, the state of each of the four slots in the window (None: no run yet)
SEEDED: dict[str, list[tuple[RunState | None, str | None]]] = {
    "weekly-update": [
        (RunState.SUCCEEDED, None),
        (RunState.APPROVED, None),
        (RunState.AWAITING_REVIEW, None),
        (None, None),
    ],
    "tips": [
        (RunState.EXPIRED, ExpiryReason.MISSED_SLOT),
        (RunState.RUNNING, None),
        (RunState.SKIPPED, SkipReason.MISFIRE),
        (RunState.PENDING, None),
    ],
}
EXPECTED_STATES = {
    "weekly-update": ["published", "approved", "waiting_for_review", "not_drafted"],
    "tips": ["missed", "drafting", "missed", "not_drafted"],
}


def seed(store: Store, config: Config, now: datetime) -> dict[str, list[Slot]]:
    """Four slots per recipe around `now`, in the states above, and one old run outside
    the window that the calendar must not show."""
    slots: dict[str, list[Slot]] = {}
    with store.transaction() as session:
        for name, states in SEEDED.items():
            recipe = config.recipes[name]
            session.add(RecipeRow(name=name, version=1, paused=False, updated_at=now))
            found = slots_between(recipe, now - timedelta(days=1), now + timedelta(days=3))
            slots[name] = found
            old = slots_between(recipe, now - timedelta(days=30), now - timedelta(days=29))
            for slot, (state, reason) in [
                *zip(found, states, strict=True),
                (old[0], (RunState.SUCCEEDED, None)),
            ]:
                if state is not None:
                    _run(session, name, slot, state, reason, now)
    return slots


def _run(
    session: Any, name: str, slot: Slot, state: RunState, reason: str | None, now: datetime
) -> None:
    run_id = slot.run_id(name)
    drafted = state not in (RunState.PENDING, RunState.SKIPPED, RunState.RUNNING)
    key = f"linkedin|{run_id}|v1" if drafted else None
    session.add(
        RunRow(
            id=run_id,
            recipe=name,
            slot_wall=run_id.partition("@")[2],
            slot_at=slot.fire_at,
            state=state,
            reason=reason,
            draft_key=key,
            created_at=now,
            updated_at=now,
            publish_at=slot.fire_at if state == RunState.APPROVED else None,
        )
    )
    session.flush()
    if key is None:
        return
    draft_state = {
        RunState.SUCCEEDED: DraftState.PUBLISHED,
        RunState.APPROVED: DraftState.APPROVED,
        RunState.AWAITING_REVIEW: DraftState.READY,
        RunState.EXPIRED: DraftState.EXPIRED,
    }[state]
    session.add(
        DraftRow(
            key=key,
            run_id=run_id,
            recipe=name,
            platform="linkedin",
            version=1,
            state=draft_state,
            text="seeded",
            revision=1,
            created_at=now,
            updated_at=now,
        )
    )
    if state == RunState.SUCCEEDED:
        session.add(
            EffectRow(
                key=f"{key}|publish:webhook",
                draft_key=key,
                step="publish",
                payload_hash="x",
                state=EffectState.SUCCEEDED,
                external_id=f"post-{run_id}",
                result=json.dumps({"url": f"https://example.test/{run_id}"}),
                created_at=now,
                updated_at=now,
            )
        )


@pytest.fixture
def seeded(tmp_path: Path, db_url: str) -> tuple[dict[str, str], Store, Config]:
    path = tmp_path / "galley.toml"
    path.write_text(CONFIG)
    config = parse_config(CONFIG)
    store = Store(db_url)
    store.upgrade()
    return {"GALLEY_CONFIG": str(path), "GALLEY_DATABASE_URL": db_url}, store, config


def runs_table(store: Store) -> dict[str, RunRow]:
    with store.read() as session:
        return {run.id: run for run in session.exec(select(RunRow)).all()}


def test_galley_calendar_json_equals_what_the_runs_table_says(
    seeded: tuple[dict[str, str], Store, Config],
) -> None:
    env, store, config = seeded
    slots = seed(store, config, datetime.now(UTC))
    result = CliRunner().invoke(app, ["calendar", "--days", "3", "--json"], env=env)
    assert result.exit_code == 0, result.output
    entries = json.loads(result.stdout)["calendar"]
    table = runs_table(store)

    shown = {(e["recipe"], e["run"]): e for e in entries}
    expected_runs = {(name, s.run_id(name)) for name, found in slots.items() for s in found}
    assert set(shown) == expected_runs  # every slot in the window, none outside it
    for name, found in slots.items():
        for slot, state in zip(found, EXPECTED_STATES[name], strict=True):
            entry = shown[(name, slot.run_id(name))]
            run = table.get(entry["run"])
            assert entry["state"] == state, entry
            assert entry["run_state"] == (None if run is None else run.state)
            assert entry["slot_at"] == slot.fire_at.isoformat()
            assert entry["target"] == ("webhook" if name == "weekly-update" else None)
            assert entry["draft_key"] == (None if run is None else run.draft_key)
            if state == "approved":
                assert run is not None and run.publish_at is not None
                assert entry["publish_at"] == run.publish_at.isoformat()
            if state == "published":
                assert entry["link"] == f"https://example.test/{entry['run']}"

    human = CliRunner().invoke(app, ["calendar"], env=env)
    assert human.exit_code == 0 and "approved, publishes" in human.stdout
    store.dispose()


def test_the_notebook_calendar_is_the_same_table_and_draws_it(
    seeded: tuple[dict[str, str], Store, Config],
) -> None:
    pytest.importorskip("matplotlib")
    _, store, config = seeded
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    seed(store, config, now)
    g = Galley(config, store, clock=FrozenClock(now))
    calendar = g.calendar(3)
    assert [e.state for e in calendar if e.recipe == "weekly-update"] == EXPECTED_STATES[
        "weekly-update"
    ]
    assert "approved, publishes Tue 24 Nov 09:00 (UTC)" in str(calendar)
    figure = g.plots.calendar(calendar)
    assert figure.axes[0].get_title() == "Publication calendar"
    store.dispose()


def test_the_home_tab_shows_what_is_coming_up_per_recipe_and_target(
    seeded: tuple[dict[str, str], Store, Config],
) -> None:
    from bot.app_home import Viewer, home_view
    from core.api.home import read_home

    _, store, config = seeded
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    seed(store, config, now)
    model = read_home(Services(config, store, clock=FrozenClock(now)))
    assert len(model.coming_up) == 10  # a week ahead, cut to COMING_UP_LIMIT
    assert [(e.recipe, e.state) for e in model.coming_up[:6]] == [
        ("tips", "drafting"),
        ("weekly-update", "approved"),
        ("tips", "missed"),
        ("weekly-update", "waiting_for_review"),
        ("tips", "not_drafted"),
        ("weekly-update", "not_drafted"),
    ]
    view = json.dumps(home_view(model, Viewer("U1", approver=True, admin=False), now=now))
    assert "*The week*" in view  # docs/design.md §36: the week in place of "Coming up"
    assert (
        "09:00 weekly-update \\u2192 webhook \\u00b7 weekly-update@2026-11-24T09:00 \\u00b7 "
        "approved, publishes Tue 24 Nov 09:00 (UTC)" in view
    )
    store.dispose()
