"""The report a team can show (docs/design.md §38): draft quality per recipe and results
per recipe (or recipe and target) over one window, as rows for `galley report`, its
JSON and CSV, `g.report()`'s DataFrame, Home's summary and the weekly report.

Every figure names what it counts and the window; a ratio over too few drafts or posts
is None with the reason beside it; an unread post is `not read`, never 0; a target
that cannot be read says it has no engagement. It reads, never writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlmodel import Session

from core.api.report_quality import MIN_SAMPLE, DraftQuality, read_quality
from core.api.report_results import PostResult, Results, best_post, group_results, read_posts
from core.drafting.lifts import offset_order
from core.drafting.scoring import BASELINE_MIN, BASELINE_POSTS
from core.identity import platform_of_target
from core.render import Rows
from core.spoken import spoken_duration

ALL_TARGETS = "all"


class ReportBy(StrEnum):
    """How results are grouped: per recipe (every target together) or recipe and target."""

    RECIPE = "recipe"
    TARGET = "target"


@dataclass(frozen=True)
class ReportRow:
    """One recipe's (or recipe and target's) figures over the window. Draft quality is
    the recipe's, whatever the target; None where the sample is too small (`note`)."""

    recipe: str
    target: str
    since: datetime
    until: datetime
    drafts: int  # made ready for review in the window
    decided: int  # approved, published, rejected or expired
    first_pass: int  # approved at revision 1 with no edit, redraft or unapprove
    first_pass_rate: float | None  # first_pass / decided
    edits_per_post: float | None  # edits of published drafts / published drafts
    redrafts_per_post: float | None
    changed_share: float | None  # mean Indel distance, model's first text to approved
    median_decision_minutes: float | None  # ready for review to approved or rejected
    rejected: int
    expired: int
    top_rejection_reasons: str  # `off-topic (2); too long (1)`
    cost_usd: float  # every model call of the recipe started in the window
    cost_per_post_usd: float | None  # cost_usd / published drafts
    published_drafts: int  # drafts of the window published: the "per post" denominator
    quality_note: str | None  # `too few: 2 drafts decided (3 needed)`
    posts: int  # posts published in the window (one per target)
    verified: int  # read back and found
    gone: int  # found deleted when read back
    not_read: int  # could be read, no reading yet: no counts, not zeros
    engagement: str | None  # `no engagement: webhook` where nothing can be read
    readings: dict[str, dict[str, float]]  # label -> posts read, median score
    posts_with_lift: int
    median_lift: float | None  # score / median of the target's previous 20 read posts
    lift_note: str | None  # why no lift

    def summary(self) -> str:
        """One short line for the Home tab: first-pass rate, posts, lift."""
        if self.first_pass_rate is None:
            drafts = f"too few drafts decided to rate ({self.decided})"
        else:
            rate = _percent(self.first_pass_rate)
            drafts = f"first-pass {rate} ({self.first_pass} of {self.decided} decided)"
        posts = f"{_posts(self.posts)}"
        if self.engagement is not None:
            posts += f", {self.engagement}"
        elif self.not_read:
            posts += f", {self.not_read} not read"
        lift = f" · lift {self.median_lift:.2f}x" if self.median_lift is not None else ""
        return f"{self.recipe}: {drafts} · {posts}{lift}"

    def lines(self) -> list[str]:
        """The row in plain sentences, each naming what it counts (no markup)."""
        return _quality_lines(self) + _result_lines(self)


class Report(Rows[ReportRow]):
    title = "report"
    row_type = ReportRow
    best: PostResult | None = None  # the window's best post (highest lift, else score)
    # every post of the window with its score at each reading (`1h`, `1d`, `7d`), not
    # only the latest, and its lift: what `--json` exports beside the rows
    posts: tuple[PostResult, ...] = ()

    def to_csv_rows(self) -> list[dict[str, Any]]:
        """One flat dict per row: each reading's posts and median score as two columns."""
        labels = sorted({label for row in self for label in row.readings}, key=offset_order)
        flat = []
        for row, whole in zip(self, self.to_json(), strict=True):
            record = {k: v for k, v in whole.items() if k != "readings"}
            for label in labels:
                reading = row.readings.get(label)
                record[f"read_{label}"] = None if reading is None else int(reading["posts"])
                record[f"median_score_{label}"] = None if reading is None else reading["median"]
            flat.append(record)
        return flat


def read_report(
    session: Session,
    recipes: list[str],
    now: datetime,
    since: timedelta,
    by: ReportBy = ReportBy.RECIPE,
) -> Report:
    """Every recipe's figures over (now - since, now]."""
    start = now - since
    quality = read_quality(session, start, now, recipes)
    posts = read_posts(session, start, now)
    groups = group_results(posts, by_target=by == ReportBy.TARGET)
    seen = {group.recipe for group in groups}
    groups += [Results(name, ALL_TARGETS) for name in sorted(quality) if name not in seen]
    groups.sort(key=lambda group: (group.recipe, group.target))
    report = Report(_row(quality[g.recipe], g, start, now) for g in groups if g.recipe in quality)
    report.best, report.posts = best_post(posts), tuple(posts)
    return report


def _row(quality: DraftQuality, results: Results, since: datetime, until: datetime) -> ReportRow:
    waited = quality.median_decision_seconds
    reasons = "; ".join(f"{reason} ({count})" for reason, count in quality.reasons)
    return ReportRow(
        recipe=quality.recipe,
        target=results.target,
        since=since,
        until=until,
        drafts=quality.drafts,
        decided=quality.decided,
        first_pass=quality.first_pass,
        first_pass_rate=quality.first_pass_rate,
        edits_per_post=quality.edits_per_post,
        redrafts_per_post=quality.redrafts_per_post,
        changed_share=quality.changed_share,
        median_decision_minutes=None if waited is None else waited / 60,
        rejected=quality.rejected,
        expired=quality.expired,
        top_rejection_reasons=reasons,
        cost_usd=round(quality.cost_usd, 6),
        cost_per_post_usd=quality.cost_per_post,
        published_drafts=quality.published,
        quality_note=quality.too_few,
        posts=results.published,
        verified=results.verified,
        gone=results.gone,
        not_read=results.not_read,
        engagement=_engagement(results),
        readings={
            label: {"posts": posts, "median": float(points)}
            for label, (posts, points) in results.readings().items()
        },
        posts_with_lift=len(results.lifts),
        median_lift=results.median_lift,
        lift_note=_lift_note(results),
    )


def _engagement(results: Results) -> str | None:
    if not results.no_engagement:
        return None
    platforms = sorted({platform_of_target(post.target) for post in results.posts})
    return "no engagement: " + ", ".join(platforms)


def _lift_note(results: Results) -> str | None:
    if results.lifts or not results.posts:
        return None if results.lifts else "no posts published"
    return f"no lift yet: needs {BASELINE_MIN} earlier read posts of the target"


def _window(row: ReportRow) -> str:
    return f"{spoken_duration(row.until - row.since)} to {row.until:%Y-%m-%d %H:%M} UTC"


def _posts(count: int) -> str:
    return f"{count} post" + ("" if count == 1 else "s")


def _percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def _quality_lines(row: ReportRow) -> list[str]:
    head = f"{row.recipe} → {row.target}, {_window(row)}"
    made = f"drafts: {row.drafts} made ready for review, {row.decided} decided"
    if row.quality_note is not None:
        return [head, made, f"draft quality: {row.quality_note}"]
    lines = [head, made]
    if row.first_pass_rate is not None:
        lines.append(
            f"first-pass approval: {_percent(row.first_pass_rate)} ({row.first_pass} of "
            f"{row.decided} decided, approved as the model wrote them: no edit or redraft)"
        )
    if row.edits_per_post is not None and row.redrafts_per_post is not None:
        lines.append(
            f"per published post: {row.edits_per_post:.2f} edits, "
            f"{row.redrafts_per_post:.2f} redrafts ({row.published_drafts} drafts published)"
        )
    else:
        lines.append(f"per published post: too few published drafts ({MIN_SAMPLE} needed)")
    if row.changed_share is not None:
        lines.append(
            f"reviewers changed {_percent(row.changed_share)} of characters (mean Indel "
            "distance, the model's latest text to the approved one)"
        )
    if row.median_decision_minutes is not None:
        waited = spoken_duration(timedelta(minutes=round(row.median_decision_minutes)))
        lines.append(f"median time from review message to decision: {waited}")
    reasons = f" ({row.top_rejection_reasons})" if row.top_rejection_reasons else ""
    lines.append(f"rejected: {row.rejected}{reasons}; expired: {row.expired}")
    per_post = (
        "too few published drafts"
        if row.cost_per_post_usd is None
        else f"${row.cost_per_post_usd:.4f} per published post"
    )
    lines.append(f"model cost: {per_post} (${row.cost_usd:.4f}, every call in the window)")
    return lines


def _result_lines(row: ReportRow) -> list[str]:
    if row.posts == 0:
        return ["posts: none published in the window"]
    lines = [
        f"posts: {row.posts} published, {row.verified} verified, {row.gone} gone, "
        f"{row.not_read} not read"
    ]
    if row.engagement is not None:
        return [*lines, row.engagement]
    readings = " · ".join(
        f"{label}: {int(r['posts'])} read, median score {r['median']:g}"
        for label, r in row.readings.items()
    )
    lines.append(f"engagement at each reading: {readings or 'not read'}")
    if row.median_lift is not None:
        lines.append(
            f"lift: median {row.median_lift:.2f}x over {_posts(row.posts_with_lift)} (score / "
            f"median of the target's previous {BASELINE_POSTS} read posts)"
        )
    elif row.lift_note is not None:
        lines.append(f"lift: {row.lift_note}")
    return lines
