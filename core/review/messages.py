"""Which review messages need work: found through indexes on what is pending, never by
reading every decided draft. Each query reads one bounded batch in a
read-only transaction; the only write here records what a message now shows.

`drafts.shown_state` / `shown_revision` say what the review message in Slack shows
(NULL: nothing posted yet). A draft whose state or revision differs from them is a
message behind its draft (partial index `ix_drafts_message_behind`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.identity import draft_of_publish_key, platform_of_target, review_effect_key
from core.models import DraftRow, EffectRow, PostCheckRow, RecipeRow, RunRow, unsettled_receipt
from core.policies import EffectStep, PostCheck
from core.publishing.readings import PLATFORM_NAMES
from core.states import DraftState, EffectState
from core.store.engine import Store
from core.store.leases import database_now

BATCH = 200  # rows one pass reads; the rest wait for the next pass, 2 s later
REVIEW_SUFFIX = review_effect_key("")  # "|review": a draft's review receipt is key + this
POSTED_UNKNOWN_REVISION = 0  # posted, but which revision it shows is not known


def unposted(session: Session) -> Sequence[tuple[DraftRow, RunRow]]:
    """Ready drafts with no message on record, oldest first, drafts ready at the same
    instant (a batch's) in key order (ix_drafts_ready)."""
    return session.exec(
        select(DraftRow, RunRow)
        .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
        .where(col(DraftRow.state) == DraftState.READY, col(DraftRow.shown_state).is_(None))
        .order_by(col(DraftRow.ready_at), col(DraftRow.key))
        .limit(BATCH)
    ).all()


def posts_not_settled(
    session: Session, step: EffectStep, decided: Iterable[DraftState]
) -> Sequence[tuple[DraftRow, RunRow]]:
    """Decided drafts whose review post is in flight or uncertain (ix_effects_unsettled)."""
    return session.exec(
        select(DraftRow, RunRow)
        .join(EffectRow, col(EffectRow.draft_key) == col(DraftRow.key))
        .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
        .where(unsettled_receipt(step), col(DraftRow.state).in_(list(decided)))
        .limit(BATCH)
    ).all()


def behind(session: Session) -> Sequence[tuple[DraftRow, RunRow, EffectRow]]:
    """Posted messages that do not show their draft's state or revision, with the
    receipt of the post. The keys come first, alone, from ix_drafts_message_behind:
    joined, PostgreSQL misjudges how rare they are and walks every draft instead."""
    keys = session.exec(
        select(DraftRow.key)
        .where(
            sa.or_(
                col(DraftRow.shown_state) != col(DraftRow.state),
                col(DraftRow.shown_revision) != col(DraftRow.revision),
            )
        )
        .limit(BATCH)
    ).all()
    if not keys:
        return []
    return session.exec(
        select(DraftRow, RunRow, EffectRow)
        .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
        .join(EffectRow, col(EffectRow.key) == col(DraftRow.key) + REVIEW_SUFFIX)
        .where(col(DraftRow.key).in_(keys), col(EffectRow.state) == EffectState.SUCCEEDED)
    ).all()


def approved_partly_published(session: Session) -> Sequence[tuple[DraftRow, RunRow]]:
    """Approved drafts some target has published already, the others not (yet): a
    failed, uncertain or waiting publication (ix_drafts_state_updated, then the draft's
    publish receipts by ix_effects_draft_key)."""
    published_somewhere = (
        select(EffectRow.key)
        .where(
            col(EffectRow.draft_key) == col(DraftRow.key),
            col(EffectRow.step) == EffectStep.PUBLISH,
            col(EffectRow.state) == EffectState.SUCCEEDED,
        )
        .exists()
    )
    return session.exec(
        select(DraftRow, RunRow)
        .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
        .where(col(DraftRow.state) == DraftState.APPROVED, published_somewhere)
        .limit(BATCH)
    ).all()


def in_backpressure(session: Session) -> Sequence[RecipeRow]:
    """Recipes with a backpressure episode on record (ix_recipes_backpressure)."""
    return session.exec(
        select(RecipeRow).where(col(RecipeRow.backpressure_since).is_not(None))
    ).all()


def settled(session: Session, keys: list[str]) -> set[str]:
    """Of these receipt keys, those that will never act again: succeeded or uncertain."""
    if not keys:
        return set()
    return set(
        session.exec(
            select(EffectRow.key).where(
                col(EffectRow.key).in_(keys),
                col(EffectRow.state).in_([EffectState.SUCCEEDED, EffectState.UNCERTAIN]),
            )
        ).all()
    )


def mark_shown(
    store: Store, shown: Iterable[tuple[str, str, int]], *, unknown: bool = False
) -> None:
    """Record what messages now show: (draft key, state, revision) each, one transaction.

    The values written are the ones shown, not the draft's current ones: a draft that
    moved on meanwhile stays behind, and the next pass updates it again. `unknown`
    (a post found again after its outcome was unknown) writes only where nothing is
    recorded yet, so a better-known value is never replaced.
    """
    rows = [{"draft": k, "shows": s, "at_revision": r} for k, s, r in sorted(shown)]
    if not rows:
        return
    drafts: sa.Table = DraftRow.__table__  # type: ignore[attr-defined]
    statement = (
        sa.update(drafts)
        .where(drafts.c.key == sa.bindparam("draft"))
        .values(shown_state=sa.bindparam("shows"), shown_revision=sa.bindparam("at_revision"))
    )
    if unknown:
        statement = statement.where(drafts.c.shown_state.is_(None))
    with store.transaction() as session:
        session.connection().execute(statement, rows)


def gone_unshown(session: Session) -> list[str]:
    """Draft keys with a post found gone that their message does not say yet
    (ix_post_checks_gone_unshown: its cost is the gone posts not shown, not the history)."""
    receipts = session.exec(
        select(PostCheckRow.receipt)
        .where(col(PostCheckRow.state) == PostCheck.GONE, col(PostCheckRow.shown_at).is_(None))
        .limit(BATCH)
    ).all()
    return sorted({draft_of_publish_key(receipt) for receipt in receipts})


def gone_notices(session: Session, draft_key: str) -> tuple[list[str], tuple[str, ...]]:
    """The draft's posts found gone: their receipts, and what its message says of each,
    "Published to Mastodon, then gone (404 at 10:02 UTC: …)" (docs/design.md §28). Its
    publish receipts by ix_effects_draft_key, their checks by key."""
    receipts = session.exec(
        select(EffectRow.key).where(
            col(EffectRow.draft_key) == draft_key, col(EffectRow.step) == EffectStep.PUBLISH
        )
    ).all()
    gone = session.exec(
        select(PostCheckRow)
        .where(
            col(PostCheckRow.receipt).in_(list(receipts)), col(PostCheckRow.state) == PostCheck.GONE
        )
        .order_by(col(PostCheckRow.receipt))
    ).all()
    return [post.receipt for post in gone], tuple(_gone_line(post) for post in gone)


def _gone_line(post: PostCheckRow) -> str:
    platform = platform_of_target(post.target)
    return f"Published to {PLATFORM_NAMES.get(platform, platform)}, then gone ({post.detail})"


def mark_gone_shown(store: Store, receipts: Sequence[str]) -> None:
    """These gone posts are said on their message now (set once: the first time stays)."""
    with store.transaction() as session:
        now = database_now(session)
        session.execute(
            sa.update(PostCheckRow)
            .where(
                col(PostCheckRow.receipt).in_(list(receipts)), col(PostCheckRow.shown_at).is_(None)
            )
            .values(shown_at=now)
        )
