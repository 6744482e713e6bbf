"""`galley report`, `g.report()` and Home's summary (docs/design.md §38) over the
hand-computed week of tests/api/report_history.py: sentences naming what each figure
counts, JSON and CSV with every reading, a DataFrame, a line per recipe. Both backends.
"""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from typer.testing import CliRunner

from bot.app_home import Viewer, home_view
from bot.cli import app
from core.api.home import read_home
from core.api.services import Services
from core.store.engine import Store
from core.testing import FrozenClock
from tests.api.report_history import (
    BEST_URL,
    BLUESKY,
    NOW,
    WEBHOOK,
    report_config,
    report_galley,
    seed,
)


@pytest.fixture
def history(store: Store, monkeypatch: pytest.MonkeyPatch) -> Store:
    seed(store)
    monkeypatch.setattr("bot.cli_report.open_galley", lambda: report_galley(store))
    return store


def test_galley_report_prints_each_figure_with_what_it_counts(history: Store) -> None:
    result = CliRunner().invoke(app, ["report"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "weekly → all, 7 days to 2026-12-07 10:00 UTC" in text
    assert "first-pass approval: 29% (2 of 7 decided" in text
    assert "median time from review message to decision: 45 minutes" in text
    assert "rejected: 2 (off-topic (2)); expired: 1" in text
    assert "posts: 6 published, 4 verified, 1 gone, 1 not read" in text
    assert "small → all" in text and "draft quality: too few: 2 drafts decided" in text
    assert f"best post: weekly on {BLUESKY}, lift 2.00x: {BEST_URL}" in text


def test_galley_report_json_by_target_gives_each_reading_and_says_no_engagement(
    history: Store,
) -> None:
    result = CliRunner().invoke(app, ["report", "--by", "target", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    rows = {(row["recipe"], row["target"]): row for row in document["rows"]}
    bluesky = rows[("weekly", BLUESKY)]
    assert bluesky["readings"] == {
        "1h": {"posts": 2, "median": 4.0},
        "1d": {"posts": 1, "median": 10.0},
    }
    assert bluesky["median_lift"] == 2.0 and bluesky["not_read"] == 1
    assert rows[("weekly", WEBHOOK)]["engagement"] == "no engagement: webhook"
    assert rows[("small", WEBHOOK)]["first_pass_rate"] is None
    assert document["best"]["url"] == BEST_URL
    posts = {post["url"]: post for post in document["posts"]}  # each reading, not the latest
    assert posts[BEST_URL]["scores"] == {"1h": 3, "1d": 10} and posts[BEST_URL]["lift"] == 2.0


def test_galley_report_csv_has_a_column_per_reading_and_empty_cells_for_too_few(
    history: Store,
) -> None:
    result = CliRunner().invoke(app, ["report", "--csv", "--since", "14d"])
    assert result.exit_code == 0, result.output
    rows = {row["recipe"]: row for row in csv.DictReader(io.StringIO(result.stdout))}
    assert rows["weekly"]["read_1h"] == "2" and rows["weekly"]["median_score_1d"] == "10.0"
    assert rows["weekly"]["drafts"] == "9"  # d0 too, ready 8 days ago
    assert rows["small"]["first_pass_rate"] == ""  # too few: no ratio, not 0
    assert rows["small"]["read_1h"] == ""


def test_a_bad_window_is_refused_by_name(history: Store) -> None:
    result = CliRunner().invoke(app, ["report", "--since", "soon"])
    assert result.exit_code != 0 and "--since" in result.output


def test_the_notebook_report_is_a_dataframe(history: Store) -> None:
    frame = report_galley(history).report("7d").to_frame()
    assert list(frame["recipe"]) == ["small", "weekly"]
    assert frame.set_index("recipe").loc["weekly", "first_pass"] == 2


def test_the_home_tab_sums_up_each_recipes_week_in_a_line(history: Store) -> None:
    services = Services(report_config(), history, clock=FrozenClock(NOW))
    home = read_home(services)
    assert [row.summary() for row in home.report] == [
        "small: too few drafts decided to rate (2) · 1 post, no engagement: webhook",
        "weekly: first-pass 29% (2 of 7 decided) · 6 posts, 1 not read · lift 2.00x",
    ]
    view = json.dumps(home_view(home, Viewer("U0EDITOR", True, True), now=NOW))
    assert "weekly: first-pass 29% (2 of 7 decided)" in view


def test_the_report_plot_draws_first_pass_rate_and_lift_per_week_with_gaps_not_zeros(
    history: Store,
) -> None:
    figure = report_galley(history).plots.report(weeks=2)
    rate_axes, lift_axes = figure.axes
    rates = {line.get_label(): list(line.get_ydata()) for line in rate_axes.get_lines()}
    # the week before had no draft decided: a gap; this week 2 of 7 first pass
    assert list(rates) == ["weekly"] and math.isnan(rates["weekly"][0])
    assert rates["weekly"][1] == pytest.approx(100 * 2 / 7)
    lifts = {line.get_label(): list(line.get_ydata()) for line in lift_axes.get_lines()}
    assert lifts["weekly"][1] == pytest.approx(2.0)
