"""`learn_from` ranks its examples by lift (docs/design.md §38): a big account's ordinary
post does not crowd out a small account's best. Both backends."""

from __future__ import annotations

from datetime import timedelta

from core.drafting.learning import read_lessons
from core.models import RecipeRow
from core.policies import PostCheck
from core.states import DraftState
from core.store.engine import Store
from tests.api.report_history import NOW, _draft, _post

BIG, SMALL = "bluesky:big.example", "mastodon:small.example"


def test_a_small_accounts_best_post_ranks_above_a_big_accounts_ordinary_one(
    store: Store,
) -> None:
    with store.transaction() as session:
        session.add(RecipeRow(name="weekly", updated_at=NOW))
        session.flush()
        for n in range(5):  # each target's baseline: 100 a post on the big one, 2 on the small
            at = NOW - timedelta(days=20 - n)
            _post(session, "weekly", f"weekly|big{n}", BIG, at, PostCheck.VERIFIED, {"1d": 100})
            _post(session, "weekly", f"weekly|small{n}", SMALL, at, PostCheck.VERIFIED, {"1d": 2})
        big = _draft(session, "weekly", "big", DraftState.PUBLISHED, 1, -3 * 24 * 60, 5, None)
        small = _draft(session, "weekly", "small", DraftState.PUBLISHED, 1, -2 * 24 * 60, 5, None)
        # 120 on the big account (lift 1.2) against 10 on the small one (lift 5)
        _post(session, "weekly", big, BIG, NOW - timedelta(days=3), PostCheck.VERIFIED, {"1d": 120})
        _post(
            session, "weekly", small, SMALL, NOW - timedelta(days=2), PostCheck.VERIFIED, {"1d": 10}
        )
    with store.read() as session:
        lessons = read_lessons(session, "weekly", NOW)
    assert [(e.target, e.score) for e in lessons.examples] == [(SMALL, 10), (BIG, 120)]
