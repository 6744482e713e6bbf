"""The report drawn over weeks (docs/design.md §38): each recipe's first-pass approval
rate and median lift, week by week, for `g.plots.report()`. Needs the `notebook` extra
(matplotlib); nothing in the bot imports this module.

Each week is its own report window (7 days ending at `now`, then the 7 before…), read
as the report reads it. A week with too few drafts or no lift is a gap, never a 0.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlmodel import Session

from core.api.report import read_report

if TYPE_CHECKING:
    from matplotlib.figure import Figure

WEEK = timedelta(days=7)


@dataclass(frozen=True)
class WeekPoint:
    recipe: str
    week_end: datetime  # the week is the 7 days before it
    first_pass_rate: float | None  # None: too few drafts decided that week
    median_lift: float | None  # None: no post with a lift that week


def weekly_points(
    session: Session, recipes: list[str], now: datetime, weeks: int
) -> list[WeekPoint]:
    """Each recipe's figures for each of the last `weeks` weeks, oldest first."""
    points = []
    for back in reversed(range(weeks)):
        end = now - WEEK * back
        for row in read_report(session, recipes, end, WEEK):
            points.append(WeekPoint(row.recipe, end, row.first_pass_rate, row.median_lift))
    return points


def report_figure(points: list[WeekPoint]) -> Figure:
    """Two panels sharing the weeks: first-pass approval rate (%) and median lift, one
    line per recipe; a gap where the week had too few to say."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9.0, 6.0), layout="constrained")
    rate_axes, lift_axes = figure.subplots(2, 1, sharex=True)
    drawn = {"rate": False, "lift": False}
    series: dict[str, list[WeekPoint]] = defaultdict(list)
    for point in points:
        series[point.recipe].append(point)
    for recipe, weekly in sorted(series.items()):
        ends = [p.week_end for p in weekly]
        rates = [None if p.first_pass_rate is None else 100 * p.first_pass_rate for p in weekly]
        lifts = [p.median_lift for p in weekly]
        if any(r is not None for r in rates):
            rate_axes.plot(ends, [_gap(r) for r in rates], marker="o", label=recipe)
            drawn["rate"] = True
        if any(v is not None for v in lifts):
            lift_axes.plot(ends, [_gap(v) for v in lifts], marker="o", label=recipe)
            drawn["lift"] = True
    rate_axes.set(title="First-pass approval rate, per week", ylabel="% of drafts decided")
    lift_axes.set(title="Median lift, per week", ylabel="score / target's baseline")
    for axes, key, words in (
        (rate_axes, "rate", "too few drafts decided in any week yet"),
        (lift_axes, "lift", "no post with a lift yet (5 earlier read posts per target)"),
    ):
        if drawn[key]:
            axes.legend(loc="best", fontsize=8)
        else:
            axes.text(0.5, 0.5, words, ha="center", va="center", transform=axes.transAxes)
    figure.autofmt_xdate()
    return figure


def _gap(value: float | None) -> float:
    return float("nan") if value is None else value
