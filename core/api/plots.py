"""Figures of Galley's history, one call each: `galley.plots.queue_depth()` and friends.

Needs the `notebook` extra (matplotlib); nothing in the bot imports this module. The
numbers come from `core/api/analytics.py`, counted by the database. Figures are built
without pyplot (no global state, no GUI backend), so they render the same in a kernel,
a test and a headless server. A time axis spans the data (a young deployment's three
days are not drawn across four years), and a plot with nothing to show says so in
words instead of drawing an empty axis.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlmodel import Session, select

from core.api.analytics import (
    OUTCOMES,
    daily_cost,
    decision_rates,
    decision_times,
    queue_depth,
    skipped_slots,
)
from core.api.queries import list_events
from core.clock import Clock, SystemClock
from core.drafting_policies import Drafting
from core.errors import UnknownRun
from core.models import PostCheckRow
from core.publishing.engagement import StatsList, read_stats
from core.setup.config import Config
from core.states import EventSubject
from core.store.engine import Store

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from core.api.calendar import Calendar

SUBJECT_LANES = tuple(EventSubject)
MARKERS_UP_TO = 120


def _figure(width: float = 9.0, height: float = 4.0) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


class Plots:
    def __init__(self, store: Store, config: Config, clock: Clock | None = None) -> None:
        self.store, self.config = store, config
        self.clock = clock or SystemClock()  # "now": no series is drawn past it

    def _read(self, query: Any, *args: Any) -> Any:
        with self.store.transaction() as session:
            return query(session, *args)

    def queue_depth(self) -> Figure:
        """Drafts waiting for review per recipe, day by day, against `pending_limit`."""
        series: dict[str, tuple[list[Any], list[int]]] = defaultdict(lambda: ([], []))
        for point in self._read(queue_depth):
            days, depths = series[point.recipe]
            days.append(point.day)
            depths.append(point.depth)
        if not series:
            figure = _figure()
            return _nothing(figure, figure.subplots(), "Review queue depth", "no drafts yet")
        # one panel per recipe: two recipes at the same depth would hide one another
        figure = _figure(9.0, 1.2 + 2.0 * len(series))
        grid = figure.subplots(len(series), 1, squeeze=False, sharex=True)
        last_day = max(day for days, _ in series.values() for day in days)
        closing = min(_as_datetime(last_day) + timedelta(days=1), self.clock.now())
        held_to = closing.astimezone(UTC).replace(tzinfo=None)  # naive UTC beside the days
        for axes, (recipe, (days, depths)) in zip(grid[:, 0], sorted(series.items()), strict=True):
            # held to the end of the last day, or to now while it lasts: a one-day
            # series is a step, not a lone point that draws nothing, nor one into the future
            axes.step([*days, held_to], [*depths, depths[-1]], where="post", label=recipe)
            if len(days) <= MARKERS_UP_TO:
                axes.plot(days, depths, "o", color="C0")
            top = max(depths)
            limit = self.config.recipes.get(recipe)
            if limit is not None:
                axes.axhline(limit.pending_limit, color="C3", linestyle="--", label="pending_limit")
                top = max(top, limit.pending_limit)
            axes.set(title=recipe, ylabel="drafts waiting", ylim=(0, top + 0.5))
            axes.yaxis.get_major_locator().set_params(integer=True)
            axes.legend(loc="upper left", fontsize=8)
        figure.suptitle("Review queue depth")
        grid[-1, 0].set_xlabel("day (UTC)")
        _span(
            grid[-1, 0],
            (day for days, _ in series.values() for day in [*days, closing]),
            timedelta(1),
        )
        figure.autofmt_xdate()
        return figure

    def decision_rates(self) -> Figure:
        """Share of drafts approved, rejected and expired, per recipe per week: which
        recipe produces work nobody wants."""
        points = self._read(decision_rates)
        recipes = sorted({p.recipe for p in points})
        if not recipes:
            figure = _figure(9.0, 2.6)
            return _nothing(figure, figure.subplots(), "Decisions", "no decisions yet")
        figure = _figure(9.0, 2.6 * len(recipes))
        grid = figure.subplots(len(recipes), 1, squeeze=False, sharex=True)
        for axes, recipe in zip(grid[:, 0], recipes, strict=True):
            for outcome in OUTCOMES:
                chosen = [p for p in points if p.recipe == recipe and p.outcome == outcome]
                if chosen:
                    axes.plot(
                        [p.week for p in chosen],
                        [p.rate for p in chosen],
                        marker=_marker(chosen),
                        label=outcome,
                    )
            axes.set(title=recipe, ylabel="share of drafts", ylim=(-0.05, 1.05))
            _legend(axes, points)
        _span(grid[-1, 0], (p.week for p in points), timedelta(weeks=1))  # shared x
        grid[-1, 0].set_xlabel("week the draft became ready (UTC)")
        figure.autofmt_xdate()
        return figure

    def time_to_decision(self) -> Figure:
        """How long drafts wait for a person: decisions per hour after ready, per recipe."""
        counts = self._read(decision_times)
        figure = _figure()
        axes = figure.subplots()
        if not counts:
            return _nothing(figure, axes, "Time from draft to decision", "no decisions yet")
        for recipe in sorted({c.recipe for c in counts}):
            chosen = [c for c in counts if c.recipe == recipe]
            axes.step(
                [c.hour for c in chosen],
                [c.drafts for c in chosen],
                where="post",
                marker=_marker(chosen),
                label=recipe,
            )
        axes.set(
            title="Time from draft to decision",
            xlabel="hours after the draft was ready",
            ylabel="drafts decided",
        )
        _legend(axes, counts)
        return figure

    def cost(self) -> Figure:
        """Model tokens and estimated cost (USD) per recipe per day."""
        points = self._read(daily_cost)
        if not points:
            figure = _figure()
            return _nothing(
                figure, figure.subplots(), "Model tokens and cost", "no model calls yet"
            )
        figure = _figure(9.0, 6.0)
        tokens_axes, cost_axes = figure.subplots(2, 1, sharex=True)
        modes = {p.mode for p in points}
        for recipe, mode in sorted({(p.recipe, p.mode) for p in points}):
            chosen = sorted(
                (p for p in points if (p.recipe, p.mode) == (recipe, mode)), key=lambda p: p.day
            )
            label = recipe if len(modes) == 1 else f"{recipe} ({mode})"  # sync vs batch
            days = [p.day for p in chosen]
            tokens = [p.input_tokens + p.output_tokens for p in chosen]
            style = "--" if mode == Drafting.BATCH else "-"
            tokens_axes.plot(days, tokens, style, marker=_marker(chosen), label=label)
            costs = [p.est_cost_usd for p in chosen]
            cost_axes.plot(days, costs, style, marker=_marker(chosen), label=label)
        tokens_axes.set(title="Model tokens per day (input + output)", ylabel="tokens")
        cost_axes.set(title="Estimated cost per day", ylabel="USD", xlabel="day (UTC)")
        _legend(tokens_axes, points)
        _span(cost_axes, (p.day for p in points), timedelta(days=1))
        figure.autofmt_xdate()
        return figure

    def skipped(self) -> Figure:
        """Slots skipped, per reason, stacked per recipe."""
        counts = self._read(skipped_slots)
        recipes = sorted({c.recipe for c in counts})
        figure = _figure()
        axes = figure.subplots()
        if not counts:
            return _nothing(figure, axes, "Skipped slots by reason", "no skipped slots")
        bottoms = [0] * len(recipes)
        for reason in sorted({c.reason for c in counts}):
            heights = [
                sum(c.runs for c in counts if c.recipe == r and c.reason == reason) for r in recipes
            ]
            axes.bar(recipes, heights, bottom=bottoms, label=reason)
            bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
        axes.set(title="Skipped slots by reason", ylabel="runs")
        _legend(axes, counts)
        return figure

    def timeline(self, run_id: str) -> Figure:
        """One run's events in time: the run, its drafts and its effects, one lane each."""
        events = self._read(
            lambda session: list_events(session, run_id=run_id, subject_id=None, limit=None)
        )
        if not events:
            raise UnknownRun(f"no events for run {run_id!r}")
        labels: dict[tuple[Any, int], list[str]] = defaultdict(list)  # one per instant
        lanes = [s for s in SUBJECT_LANES if any(e.subject == s for e in events)]
        for event in events:
            lane = lanes.index(event.subject)
            labels[(event.at, lane)].append(f"{event.to_state} ({event.actor})")
        figure = _figure(9.0, min(12.0, 1.6 + 0.9 * len(lanes) + 0.22 * len(labels)))
        axes = figure.subplots()
        for lane, subject in enumerate(lanes):
            chosen = [e for e in events if e.subject == subject]
            axes.scatter([e.at for e in chosen], [lane] * len(chosen), label=subject, zorder=3)
        first, last = min(e.at for e in events), max(e.at for e in events)
        pad = max((last - first) / 10, timedelta(minutes=5))
        axes.set_xlim(first - pad, last + pad)
        axes.set_yticks(range(len(lanes)), lanes)
        axes.set(title=f"Timeline of {run_id}", xlabel="time (UTC)", ylim=(-0.5, len(lanes)))
        figure.autofmt_xdate()
        _place_apart(
            figure,
            [
                axes.annotate(
                    " → ".join(texts),
                    (at, lane),
                    xytext=(4, 4),
                    textcoords="offset points",
                    fontsize=8,
                    annotation_clip=False,
                )
                for (at, lane), texts in sorted(labels.items())
            ],
        )
        return figure

    @staticmethod
    def calendar(entries: Calendar) -> Figure:
        """The publication calendar (`galley.calendar()`): one lane per recipe and target,
        each slot a dot at its time, coloured by its state."""
        figure = _figure(9.0, 1.5 + 0.5 * len({(e.recipe, e.target) for e in entries}))
        axes = figure.subplots()
        if not entries:
            return _nothing(figure, axes, "Publication calendar", "no slots in this window")
        lanes = sorted({(e.recipe, e.target or "no publish") for e in entries})
        lane_of = {lane: n for n, lane in enumerate(lanes)}
        for state in sorted({e.state for e in entries}):
            chosen = [e for e in entries if e.state == state]
            times: Any = [e.slot_at for e in chosen]  # matplotlib takes datetimes as dates
            axes.scatter(
                times,
                [lane_of[(e.recipe, e.target or "no publish")] for e in chosen],
                label=state,
                zorder=3,
            )
        axes.set_yticks(range(len(lanes)), [f"{recipe} → {target}" for recipe, target in lanes])
        axes.set(title="Publication calendar", xlabel="slot (UTC)", ylim=(-0.5, len(lanes)))
        _span(axes, (e.slot_at for e in entries), timedelta(hours=1))
        _legend(axes, entries)
        figure.autofmt_xdate()
        return figure

    def report(self, weeks: int = 12) -> Figure:
        """Each recipe's first-pass approval rate and median lift over the last `weeks`
        weeks (docs/design.md §38)."""
        from core.api.report_plots import report_figure, weekly_points

        recipes, now = list(self.config.recipes), self.clock.now()
        return report_figure(self._read(weekly_points, recipes, now, weeks))

    def engagement(self, days: int = 90) -> Figure:
        """Each published post's score at its latest reading (likes + 2 reposts + 2
        replies + quotes, docs/design.md §28), per recipe and target, over the `days`
        before the newest publication."""
        posts = sorted(self._read(_recent_posts, days), key=lambda post: post.published_at)
        figure = _figure()
        axes = figure.subplots()
        title = "Engagement of published posts"
        if not posts:
            return _nothing(figure, axes, title, "no published post read back yet")
        series: dict[str, tuple[list[Any], list[int]]] = defaultdict(lambda: ([], []))
        for post in posts:
            instants, scores = series[f"{post.recipe} → {post.target}"]
            instants.append(post.published_at)
            scores.append(post.score)
        for label, (instants, scores) in sorted(series.items()):
            axes.plot(instants, scores, marker=_marker(instants), label=label)
        axes.set(title=title, ylabel="score at the latest reading")
        _span(axes, [post.published_at for post in posts], timedelta(days=1))
        _legend(axes, posts)
        figure.autofmt_xdate()
        return figure


def _place_apart(figure: Figure, notes: list[Any]) -> None:
    """Each event's label beside its point, raised a line at a time until it overlaps
    no label placed before it: events minutes apart in a run of days share an x."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas: Any = FigureCanvasAgg(figure)  # its renderer measures text as drawn
    renderer = canvas.get_renderer()
    figure.draw_without_rendering()  # the layout the boxes are measured in
    placed: list[Any] = []
    for note in notes:
        for rise in range(len(notes) + 1):
            note.xyann = (4, 4 + 11 * rise)
            box = note.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                break
        placed.append(box)


def _nothing(figure: Figure, axes: Any, title: str, words: str) -> Figure:
    """A figure that says there is nothing to plot yet, rather than an empty frame."""
    axes.set_axis_off()
    axes.set_title(title)
    axes.text(0.5, 0.5, words, ha="center", va="center", fontsize=14, transform=axes.transAxes)
    return figure


def _span(axes: Any, instants: Iterable[date | datetime], step: timedelta) -> None:
    """Bound a time axis by the data, half a `step` either side, or matplotlib widens a
    few days to years (one day alone to four)."""
    moments = [_as_datetime(i) for i in instants]
    if moments:
        pad = max((max(moments) - min(moments)) / 20, step / 2)
        axes.set_xlim(min(moments) - pad, max(moments) + pad)


def _as_datetime(instant: date | datetime) -> datetime:
    if isinstance(instant, datetime):
        return instant
    return datetime.combine(instant, time(0), tzinfo=UTC)


def _marker(points: list[Any]) -> str | None:
    """Dots while a person can count them; a plain line over years of history (markers
    on 10,000 points cost seconds to draw and show nothing more)."""
    return "o" if len(points) <= MARKERS_UP_TO else None


def _legend(axes: Any, data: Any) -> None:
    if data:
        axes.legend(loc="best", fontsize=8)


def _recent_posts(session: Session, days: int) -> StatsList:
    """The posts of the `days` before the newest publication that have a reading (an
    unread post has no score to draw, not a score of 0): no clock, no today."""
    newest = session.exec(select(sa.func.max(PostCheckRow.published_at))).one()
    if newest is None:
        return StatsList()
    posts = read_stats(session, newest + timedelta(seconds=1), days)
    return StatsList(post for post in posts if post.unread is None)
