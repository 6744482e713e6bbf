"""The week at a glance (docs/design.md §36): the Home tab a viewer is sent over
`views.publish` shows the same week as `galley calendar --json` and `g.week()`, day by
day, per recipe and target with each entry's state, the drafts the viewer may approve
first, and an items recipe's items found and not drafted yet. Both backends.

The CLI reads the real clock, so the history is seeded around it from the schedule's own
slots (tests/api/test_calendar.py), and Home reads the same instant through its clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from slack_sdk import WebClient
from typer.testing import CliRunner

from bot.cli import app
from bot.home_tab import HomeTab
from core.api.galley import Galley
from core.api.services import Services
from core.api.week import entry_text, read_week
from core.identity import item_run_id
from core.models import PolledItemRow, RecipeRow, RunRow
from core.setup.config import Config, parse_config
from core.states import RunState
from core.store.engine import Store
from core.testing import FrozenClock
from tests.api.test_calendar import CONFIG, seed
from tests.fakes.slack_api import FakeSlack
from tests.harness.slow_marks import starts_a_server

REVIEWER = "U0REVIEWER"
OUTSIDER = "U0OUTSIDER"
WITH_APPROVERS = CONFIG.replace(
    '[slack]\nreview_channel = "C0REVIEW"',
    f'[slack]\nreview_channel = "C0REVIEW"\napprovers = ["{REVIEWER}"]',
)


@pytest.fixture
@starts_a_server
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack().start()
    yield fake
    fake.stop()


@pytest.fixture
def seeded(tmp_path: Path, db_url: str) -> Iterator[tuple[dict[str, str], Store, Config]]:
    path = tmp_path / "galley.toml"
    path.write_text(WITH_APPROVERS)
    store = Store(db_url)
    store.upgrade()
    yield (
        {"GALLEY_CONFIG": str(path), "GALLEY_DATABASE_URL": db_url},
        store,
        parse_config(WITH_APPROVERS),
    )
    store.dispose()


def home_of(slack: FakeSlack, services: Services, user: str) -> dict[str, Any]:
    client = WebClient(token="xoxb-test", base_url=slack.url + "/api/", retry_handlers=[])
    assert HomeTab(services, client).opened(user)
    [call] = [c for c in slack.calls("views.publish") if c.params["user_id"] == user]
    view: dict[str, Any] = call.params["view"]
    return view


def day_lines(view: dict[str, Any]) -> dict[str, list[str]]:
    """Each day's block of the Home week: its entry lines, the day's title left out."""
    days = {}
    for block in view["blocks"]:
        block_id = str(block.get("block_id", ""))
        if block_id.startswith("week:"):
            _, *lines = block["text"]["text"].split("\n")
            days[block_id.removeprefix("week:")] = lines
    return days


def test_the_home_week_is_what_galley_calendar_says(
    seeded: tuple[dict[str, str], Store, Config], slack: FakeSlack
) -> None:
    env, store, config = seeded
    now = datetime.now(UTC)
    seed(store, config, now)
    services = Services(config, store, clock=FrozenClock(now))
    view = home_of(slack, services, REVIEWER)
    result = CliRunner().invoke(app, ["calendar", "--json"], env=env)
    assert result.exit_code == 0, result.output
    week = json.loads(result.stdout)["week"]

    shown = day_lines(view)
    assert list(shown) == [day["day"] for day in week["days"]]  # 7 days, today first
    assert len(shown) == 7
    with store.read() as session:
        value = read_week(session, config, now)
    assert value.to_json() == week  # the one value both render
    entries = 0
    for day, model_day in zip(week["days"], value.days, strict=True):
        lines = shown[day["day"]]
        expected = [entry_text(e, value.zone) for e in model_day.entries]
        assert [_plain(line) for line in lines] == (expected or ["_nothing planned_"])
        for line, entry in zip(lines, day["entries"], strict=False):
            assert entry["run"] in _plain(line) and _plain(entry["shown"]) in _plain(line)
        entries += len(day["entries"])
    assert entries >= 7  # both recipes' daily slots, the seeded states among them

    [first] = [b for b in view["blocks"] if "Needs your approval first" in str(b)]
    waiting = [e for d in week["days"] for e in d["entries"] if e["state"] == "waiting_for_review"]
    assert waiting and all(e["run"] in first["text"]["text"] for e in waiting)


def test_someone_who_may_not_approve_sees_the_week_but_nothing_first(
    seeded: tuple[dict[str, str], Store, Config], slack: FakeSlack
) -> None:
    _, store, config = seeded
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    seed(store, config, now)
    view = home_of(slack, Services(config, store, clock=FrozenClock(now)), OUTSIDER)
    assert len(day_lines(view)) == 7
    assert "Needs your approval first" not in json.dumps(view)


ITEMS = """
[[recipes]]
name = "news"
platform = "blog"
schedule = "*/30 * * * *"
prompt = "One post per item."
draft_ahead = "0s"
trigger = "items"
source = { kind = "feed", url = "https://blog.example.com/feed.xml", name = "blog" }
"""


def test_items_found_and_not_drafted_are_in_the_week(db_url: str) -> None:
    config = parse_config(CONFIG + ITEMS)
    store = Store(db_url)
    store.upgrade()
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    with store.transaction() as session:
        session.add(RecipeRow(name="news", version=1, paused=False, updated_at=now))
        session.flush()
        for n, state in enumerate([RunState.PENDING, RunState.PENDING, RunState.SUCCEEDED]):
            run_id = item_run_id("news", f"i{n}")
            session.add(
                RunRow(
                    id=run_id,
                    recipe="news",
                    slot_wall=run_id.partition("@")[2],
                    slot_at=now - timedelta(minutes=30 - n),
                    state=state,
                    created_at=now,
                    updated_at=now,
                )
            )
            session.add(
                PolledItemRow(
                    recipe="news",
                    source="blog",
                    item_id=f"i{n}",
                    run_id=run_id,
                    title=f"Item {n}",
                    text="",
                    seen_at=now,
                )
            )
    week = Galley(config, store, clock=FrozenClock(now)).week()
    [waiting] = week.items_waiting
    assert (waiting.recipe, waiting.count, waiting.oldest) == ("news", 2, ("Item 0", "Item 1"))
    store.dispose()


def _plain(text: str) -> str:
    """What a line says once Slack's mrkdwn escapes are read."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
