"""The report's figures (docs/design.md §38) against a hand-computed week of history
(tests/api/report_history.py): edits, redrafts, stages, expiries, a deleted post and an
unread post. Both backends.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import col, select

from core.api.report import Report, ReportBy, read_report
from core.models import DraftRow
from core.store.engine import Store
from tests.api.report_history import BEST_URL, BLUESKY, NOW, WEBHOOK, _event, seed

RECIPES = ["weekly", "small"]


def report(
    store: Store, since: timedelta = timedelta(days=7), by: ReportBy = ReportBy.RECIPE
) -> Report:
    with store.read() as session:
        return read_report(session, RECIPES, NOW, since, by)


@pytest.fixture
def history(store: Store) -> Store:
    seed(store)
    return store


def test_draft_quality_counts_first_pass_edits_redrafts_changes_waits_and_cost(
    history: Store,
) -> None:
    [weekly] = [row for row in report(history) if row.recipe == "weekly"]
    assert (weekly.drafts, weekly.decided, weekly.first_pass) == (8, 7, 2)  # d1..d8; d0 before
    assert weekly.first_pass_rate == pytest.approx(2 / 7)  # d1, and d7 after two stages
    assert weekly.edits_per_post == pytest.approx(2 / 3)  # d2 and d3 edited once each
    assert weekly.redrafts_per_post == pytest.approx(1 / 3)  # d3 redrafted
    # d2: `Hello world` → `Hello there world`, 6 of 28 characters inserted; d3: the
    # redraft `abc` → `abd`, 2 of 6; d1 and d7 unchanged
    assert weekly.changed_share == pytest.approx((6 / 28 + 2 / 6) / 4)
    assert weekly.median_decision_minutes == pytest.approx(45)  # 10 20 30 | 60 90 120
    assert (weekly.rejected, weekly.expired) == (2, 1)
    assert weekly.top_rejection_reasons == "off-topic (2)"
    # four calls of 1,000 tokens in and 200 out at $3 and $15 per million: $0.024
    assert weekly.cost_usd == pytest.approx(0.024)
    assert weekly.cost_per_post_usd == pytest.approx(0.008)
    assert weekly.quality_note is None


@pytest.mark.parametrize("change", ["unapprove", "redraft"])
def test_an_approval_taken_back_or_a_redraft_alone_is_no_first_pass(
    history: Store, change: str
) -> None:
    """d7, approved at revision 1 with no edit, loses its first pass to an unapproval or
    a redraft alone (no edit): each is a person's change to what the model wrote."""
    with history.transaction() as session:
        key = session.exec(
            select(DraftRow.key).where(
                col(DraftRow.recipe) == "weekly",
                col(DraftRow.decided_at) == NOW - timedelta(minutes=23 * 60 - 120),
            )
        ).one()
        _event(session, key, change, 1, NOW - timedelta(hours=1))
    [weekly] = [row for row in report(history) if row.recipe == "weekly"]
    assert (weekly.decided, weekly.first_pass) == (7, 1)  # d1 only
    assert weekly.edits_per_post == pytest.approx(2 / 3)  # d7 is approved, not published


def test_results_count_every_reading_and_lift_against_the_targets_own_baseline(
    history: Store,
) -> None:
    by_target = {row.target: row for row in report(history, by=ReportBy.TARGET)}
    bluesky = by_target[BLUESKY]
    assert (bluesky.posts, bluesky.verified, bluesky.gone, bluesky.not_read) == (3, 1, 1, 1)
    assert bluesky.readings == {
        "1h": {"posts": 2, "median": 4.0},  # d1's 3 and the deleted d2's 5
        "1d": {"posts": 1, "median": 10.0},
    }
    # d1's 10 at 1d over the median 1d score of the six posts before it (2 4 4 6 8 10)
    assert (bluesky.median_lift, bluesky.posts_with_lift) == (pytest.approx(2.0), 1)
    webhook = by_target[WEBHOOK]
    assert (webhook.posts, webhook.verified, webhook.not_read) == (3, 3, 0)
    assert webhook.engagement == "no engagement: webhook"
    assert webhook.readings == {} and webhook.median_lift is None


def test_a_recipe_with_too_few_drafts_says_so_rather_than_a_ratio(history: Store) -> None:
    [small] = [row for row in report(history) if row.recipe == "small"]
    assert small.drafts == 2 and small.first_pass == 1
    assert small.first_pass_rate is None and small.changed_share is None
    assert small.quality_note == "too few: 2 drafts decided (3 needed)"
    assert small.engagement == "no engagement: webhook"
    lines = "\n".join(small.lines())
    assert "too few" in lines and "%" not in lines


def test_an_unread_post_is_not_read_never_zero_and_the_best_post_is_linked(
    history: Store,
) -> None:
    found = report(history)
    assert found.best is not None and found.best.url == BEST_URL
    [weekly] = [row for row in found if row.recipe == "weekly"]
    text = "\n".join(weekly.lines())
    assert "1 not read" in text and "lift: median 2.00x" in text
    assert "1h: 2 read, median score 4" in text


def test_the_window_counts_only_what_happened_in_it(history: Store) -> None:
    [weekly] = [row for row in report(history, since=timedelta(days=1)) if row.recipe == "weekly"]
    assert (weekly.drafts, weekly.decided, weekly.posts) == (2, 1, 0)  # d7 decided, d8 waits
    assert weekly.quality_note == "too few: 1 drafts decided (3 needed)"
    assert weekly.until - weekly.since == timedelta(days=1)
