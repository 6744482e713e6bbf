"""Every plot shows what the database holds: on a seeded history, each plotted series
(read back from the figure's own artists) equals a direct SQL count written here
independently of `core/api/analytics.py` (ranges of instants, not date functions).

Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from matplotlib.colors import to_rgba_array
from matplotlib.dates import date2num

from core.api.plots import Plots
from core.setup.config import parse_config
from core.store.engine import Store
from core.telemetry.pricing import estimated_cost_usd
from core.testing import FrozenClock
from tests.harness.history import CONFIG, RECIPES, History, seed_history

START = datetime(2026, 9, 7, 6, 0, tzinfo=UTC)  # a Monday
RUNS = 150  # 300 hours: about two weeks, three recipes


@pytest.fixture
def seeded(store: Store) -> History:
    return seed_history(store, runs=RUNS, start=START)


@pytest.fixture
def plots(store: Store) -> Plots:
    """Plots read a year after the seeded history: no "today" of the machine's."""
    return Plots(store, parse_config(CONFIG), FrozenClock(START + timedelta(days=365)))


def scalar(store: Store, sql: str, **params: Any) -> Any:
    with store.transaction() as session:
        return session.execute(sa.text(sql), params).scalar()


def midnight_after(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=UTC)


def _dates(values: Any) -> list[date]:
    return [v if isinstance(v, date) else date.fromisoformat(str(v)) for v in values]


def test_queue_depth_is_the_ready_drafts_at_each_days_end(
    store: Store, seeded: History, plots: Plots
) -> None:
    figure = plots.queue_depth()
    panels = {axes.get_title(): axes for axes in figure.axes}

    checked = 0
    for recipe in RECIPES:
        lines = {line.get_label(): line for line in panels[recipe].get_lines()}
        line = lines[recipe]
        steps = zip(_dates(line.get_xdata()[:-1]), line.get_ydata()[:-1], strict=True)
        for day, depth in steps:  # the last step is the last day's depth, held
            waiting = scalar(
                store,
                """SELECT COUNT(*) FROM events AS entered
                   JOIN drafts ON drafts.key = entered.subject_id
                   WHERE drafts.recipe = :recipe AND entered.subject = 'draft'
                     AND entered.to_state = 'ready' AND entered.at < :end
                     AND NOT EXISTS (
                       SELECT 1 FROM events AS exited
                       WHERE exited.subject_id = entered.subject_id
                         AND exited.from_state = 'ready' AND exited.to_state <> 'ready'
                         AND exited.at < :end)""",
                recipe=recipe,
                end=_param(store, midnight_after(day)),
            )
            assert depth == waiting, (recipe, day)
            checked += 1
        limit_line = lines["pending_limit"]
        assert list(limit_line.get_ydata()) == [plots.config.recipes[recipe].pending_limit] * 2
    assert checked >= 3 * 10  # every recipe, about two weeks of days


def test_decision_rates_are_each_weeks_shares_of_decided_drafts(
    store: Store, seeded: History, plots: Plots
) -> None:
    figure = plots.decision_rates()
    by_recipe = {axes.get_title(): axes for axes in figure.axes}
    assert set(by_recipe) == set(RECIPES)

    checked = 0
    outcome_states = {
        "approved": ("approved", "published"),
        "rejected": ("rejected",),
        "expired": ("expired",),
    }
    for recipe, axes in by_recipe.items():
        for line in axes.get_lines():
            states = outcome_states[str(line.get_label())]
            for week, rate in zip(_dates(line.get_xdata()), line.get_ydata(), strict=True):
                window = {
                    "recipe": recipe,
                    "start": _param(store, datetime.combine(week, time(0), tzinfo=UTC)),
                    "end": _param(
                        store, datetime.combine(week, time(0), tzinfo=UTC) + timedelta(days=7)
                    ),
                }
                decided = scalar(
                    store,
                    """SELECT COUNT(*) FROM drafts WHERE recipe = :recipe
                       AND ready_at >= :start AND ready_at < :end
                       AND state IN ('approved', 'published', 'rejected', 'expired')""",
                    **window,
                )
                chosen = scalar(
                    store,
                    f"""SELECT COUNT(*) FROM drafts WHERE recipe = :recipe
                       AND ready_at >= :start AND ready_at < :end
                       AND state IN ({", ".join(f"'{s}'" for s in states)})""",
                    **window,
                )
                assert week.weekday() == 0
                assert rate == pytest.approx(chosen / decided), (recipe, week, line.get_label())
                checked += 1
    assert checked >= 12  # most recipe x outcome x week points


def test_time_to_decision_counts_decisions_per_hour_after_ready(
    store: Store, seeded: History, plots: Plots
) -> None:
    figure = plots.time_to_decision()
    [axes] = figure.axes
    lines = {str(line.get_label()): line for line in axes.get_lines()}

    for recipe in RECIPES:
        with store.transaction() as session:
            pairs = session.execute(
                sa.text(
                    "SELECT ready_at, decided_at FROM drafts WHERE recipe = :recipe "
                    "AND decided_at IS NOT NULL"
                ),
                {"recipe": recipe},
            ).all()
        expected: dict[int, int] = {}
        for ready, decided in pairs:
            hour = int((_aware(decided) - _aware(ready)).total_seconds() // 3600)
            expected[hour] = expected.get(hour, 0) + 1
        plotted = dict(zip(lines[recipe].get_xdata(), lines[recipe].get_ydata(), strict=True))
        assert sum(expected.values()) > 5
        assert plotted == expected


def test_cost_plots_tokens_and_estimated_cost_per_recipe_per_day(
    store: Store, seeded: History, plots: Plots
) -> None:
    figure = plots.cost()
    tokens_axes, cost_axes = figure.axes[:2]
    tokens = {line.get_label(): line for line in tokens_axes.get_lines()}
    costs = {line.get_label(): line for line in cost_axes.get_lines()}

    for recipe in RECIPES:
        days = _dates(tokens[recipe].get_xdata())
        assert days == _dates(costs[recipe].get_xdata())
        for day, plotted_tokens, plotted_cost in zip(
            days, tokens[recipe].get_ydata(), costs[recipe].get_ydata(), strict=True
        ):
            start = datetime.combine(day, time(0), tzinfo=UTC)
            with store.transaction() as session:
                rows = session.execute(
                    sa.text(
                        "SELECT model, input_tokens, output_tokens FROM attempts "
                        "WHERE recipe = :recipe AND started_at >= :start AND started_at < :end"
                    ),
                    {
                        "recipe": recipe,
                        "start": _param(store, start),
                        "end": _param(store, start + timedelta(days=1)),
                    },
                ).all()
            assert plotted_tokens == sum(i + o for _, i, o in rows)
            assert plotted_cost == pytest.approx(
                sum(estimated_cost_usd(m, i, o) for m, i, o in rows)
            )


def test_skipped_slots_are_counted_per_recipe_and_reason(
    store: Store, seeded: History, plots: Plots
) -> None:
    figure = plots.skipped()
    [axes] = figure.axes
    labels = [tick.get_text() for tick in axes.get_xticklabels()]

    total = 0
    for bars in axes.containers:
        reason = bars.get_label()
        for recipe, bar in zip(labels, bars, strict=True):
            count = scalar(
                store,
                "SELECT COUNT(*) FROM runs "
                "WHERE state = 'skipped' AND recipe = :r AND reason = :why",
                r=recipe,
                why=reason,
            )
            assert bar.get_height() == count, (recipe, reason)
            total += count
    assert total == scalar(store, "SELECT COUNT(*) FROM runs WHERE state = 'skipped'") > 0


def test_a_runs_timeline_has_one_point_per_event(
    store: Store, seeded: History, plots: Plots
) -> None:
    run_id = seeded.run_ids[1]
    figure = plots.timeline(run_id)
    [axes] = figure.axes

    for collection in axes.collections:
        subject = str(collection.get_label())
        with store.transaction() as session:
            times = session.execute(
                sa.text("SELECT at FROM events WHERE run_id = :run AND subject = :s ORDER BY id"),
                {"run": run_id, "s": subject},
            ).scalars()
            expected = [date2num(_aware(t)) for t in times]
        assert [x for x, _ in collection.get_offsets()] == pytest.approx(expected)
    assert sum(len(c.get_offsets()) for c in axes.collections) == scalar(
        store, "SELECT COUNT(*) FROM events WHERE run_id = :run", run=run_id
    )


def _aware(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _param(store: Store, instant: datetime) -> Any:
    """SQLite stores naive UTC text; PostgreSQL takes the aware instant."""
    if store.dialect == "sqlite":
        return instant.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
    return instant


def test_a_young_deployments_time_axes_span_its_days_not_years(store: Store, plots: Plots) -> None:
    seed_history(store, runs=6, start=START)  # twelve hours of history
    for figure in (plots.queue_depth(), plots.cost(), plots.decision_rates()):
        for axes in figure.axes:
            low, high = axes.get_xlim()  # in days; matplotlib alone would show four years
            assert low <= date2num(START) < high and high - low <= 8


@pytest.mark.parametrize(
    ("plot", "words"),
    [
        ("skipped", "no skipped slots"),
        ("queue_depth", "no drafts yet"),
        ("decision_rates", "no decisions yet"),
        ("time_to_decision", "no decisions yet"),
        ("cost", "no model calls yet"),
    ],
)
def test_a_plot_with_nothing_to_show_says_so_instead_of_an_empty_axis(
    store: Store, plots: Plots, plot: str, words: str
) -> None:
    figure = getattr(plots, plot)()
    [axes] = figure.axes
    assert not axes.axison
    assert [text.get_text() for text in axes.texts] == [words]


def _rendered(figure: Any) -> tuple[Any, Any]:
    """The figure drawn as the PNG a person sees: the RGBA pixels and the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()), canvas.get_renderer()


def _painted_along(
    figure: Any, axes: Any, color: Any, start: tuple[Any, float], end: tuple[Any, float]
) -> float:
    """The share of points on the segment from `start` to `end` (data coordinates)
    painted in `color` (within a pixel) on the rendered figure."""
    pixels, _ = _rendered(figure)
    wanted = np.array(to_rgba_array(color)[0][:3] * 255)
    (x0, y0), (x1, y1) = axes.transData.transform(
        [(date2num(start[0]), start[1]), (date2num(end[0]), end[1])]
    )
    hits = 0
    samples = np.linspace(0.1, 0.9, 17)
    for t in samples:
        column, row = x0 + t * (x1 - x0), pixels.shape[0] - (y0 + t * (y1 - y0))
        near = pixels[int(row) - 1 : int(row) + 2, int(column) - 1 : int(column) + 2, :3]
        hits += bool((np.abs(near.astype(int) - wanted).max(axis=-1) < 40).any())
    return hits / len(samples)


def test_two_drafts_waiting_on_one_day_are_drawn_as_a_step_at_two(
    store: Store, plots: Plots
) -> None:
    seed_history(store, runs=2, start=START, seed=92)  # two runs, both drafts still ready
    assert scalar(store, "SELECT COUNT(*) FROM drafts WHERE state = 'ready'") == 2
    figure = plots.queue_depth()
    panels = {axes.get_title(): axes for axes in figure.axes}
    day = START.date()

    assert sorted(panels) == sorted(RECIPES[:2])
    for recipe, axes in panels.items():  # one waiting draft each, that day and after
        [line] = [line for line in axes.get_lines() if line.get_label() == recipe]
        start, end = (_as_dt(day), 1.0), (_as_dt(day + timedelta(days=1)), 1.0)
        assert _painted_along(figure, axes, line.get_color(), start, end) > 0.8


def test_the_queue_depth_is_drawn_up_to_now_and_not_into_the_future(store: Store) -> None:
    seed_history(store, runs=2, start=START, seed=92)  # drafts still ready at 19:00
    now = START + timedelta(hours=13)
    figure = Plots(store, parse_config(CONFIG), FrozenClock(now)).queue_depth()

    for axes in figure.axes:
        [line] = [line for line in axes.get_lines() if line.get_label() in RECIPES]
        assert max(date2num(x) for x in line.get_xdata()) == pytest.approx(date2num(now))
        assert axes.get_xlim()[1] < date2num(START.replace(hour=0) + timedelta(days=1, hours=12))


def _as_dt(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def test_a_runs_timeline_labels_every_event_and_none_overlap(
    store: Store, seeded: History, plots: Plots
) -> None:
    run_id = next(r for r in seeded.run_ids if _events_of(store, r) >= 6)
    figure = plots.timeline(run_id)
    [axes] = figure.axes
    _, renderer = _rendered(figure)

    boxes = [note.get_window_extent(renderer) for note in axes.texts]
    frame = figure.bbox
    assert sum(text.get_text().count("(") for text in axes.texts) == _events_of(store, run_id)
    for n, box in enumerate(boxes):
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and box.y1 <= frame.y1
        assert not any(box.overlaps(other) for other in boxes[n + 1 :])


def _events_of(store: Store, run_id: str) -> int:
    return int(scalar(store, "SELECT COUNT(*) FROM events WHERE run_id = :run", run=run_id))
