"""The rows of published posts read back (docs/design.md §28): publications lately
succeeded taken up once, due rows claimed by one pass at a time, and each claim's outcome
written under its owner token. It never calls a platform; `readings.py` does.

Every read is of what is due (ix_post_checks_due) or lately published
(ix_effects_published): a pass costs the posts due, never the history's length.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.failpoints import Failpoint, failpoint
from core.identity import (
    MANUAL_PROOF,
    is_manual_proof,
    part_of_publish_key,
    recipe_of_run,
    run_of_draft_key,
    target_of_publish_key,
)
from core.models import PUBLISHED_RECEIPT, EffectRow, PostCheckRow, PostReadingRow
from core.policies import EffectStep, PostCheck
from core.ports import PostCounts, PostUnknown
from core.publishing.targets import PUBLIC_URL
from core.setup.durations import format_duration
from core.states import EffectState
from core.store.engine import insert_ignore

# Publications older than this when first seen are not read back. Only a running replica
# publishes, and each replica's pass takes its publications up within a minute or two.
TAKE_UP_WITHIN = timedelta(days=1)
# A receipt stamped before the newest one taken up may commit after it was read (two
# replicas publishing at once): each pass reads this far behind the newest it took up.
TAKE_UP_OVERLAP = timedelta(minutes=10)
TAKE_UP_BATCH = 500
# A publication's read-back state as people read it (`galley show`); no row yet: not read.
READ_BACK_WORDS = {
    PostCheck.DUE: "not read yet",
    PostCheck.VERIFIED: "verified",
    PostCheck.GONE: "gone",
    PostCheck.UNREADABLE: "cannot be read back",
    PostCheck.MARKED: "marked published by a person: not read back",
    PostCheck.UNCONFIRMED: "never found before its last reading",
}
CLAIM_FOR = timedelta(minutes=5)  # a claimed row is due again this late if its reader died
FIRST_RETRY = timedelta(minutes=1)
LAST_RETRY = timedelta(hours=1)
# doublings from FIRST_RETRY past LAST_RETRY: the exponent is capped here, so no count of
# tries makes the arithmetic overflow (2**42 minutes does not fit in a timedelta)
LAST_DOUBLING = math.ceil(math.log2(LAST_RETRY / FIRST_RETRY))
LONGEST_ASKED = timedelta(days=1)  # a platform's wait beyond this is taken as this
# A row still read in vain this long after its last reading's time ends (`read_until`):
# every row reaches an end, never read hourly forever.
READ_FOR_AFTER_LAST = timedelta(days=1)


@dataclass(frozen=True)
class Schedule:
    """When a recipe's posts are read: `verify_after`, then each `engagement_at` offset."""

    verify_after: timedelta
    engagement_at: tuple[timedelta, ...]

    def next_reading(self, published_at: datetime, done: int) -> datetime | None:
        if done >= len(self.engagement_at):
            return None
        return published_at + self.engagement_at[done]

    def read_until(self, published_at: datetime) -> datetime:
        """When a row that could not be read ends: its last reading's time (or its
        verification's) and READ_FOR_AFTER_LAST more."""
        last = max((self.verify_after, *self.engagement_at))
        return published_at + last + READ_FOR_AFTER_LAST

    def reading_now(self, published_at: datetime, done: int, now: datetime) -> int:
        """The index of the latest offset passed by `now` (at least `done`): a reading
        missed while no replica ran is taken once, under the latest label it passed."""
        passed = [i for i, at in enumerate(self.engagement_at) if published_at + at <= now]
        return max([done, *passed])


def label_of(offset: timedelta) -> str:
    return format_duration(offset)


def retry_delay(tries: int, asked: float | None = None) -> timedelta:
    """Backoff between reads that could not tell: doubling from a minute to an hour, or
    what the platform asked for when that is longer (at most LONGEST_ASKED)."""
    doublings = min(max(tries - 1, 0), LAST_DOUBLING)
    backoff: timedelta = min(FIRST_RETRY * 2**doublings, LAST_RETRY)
    return max(backoff, timedelta(seconds=min(asked or 0, LONGEST_ASKED.total_seconds())))


def take_up_publications(
    session: Session, now: datetime, verify_after: Callable[[str], timedelta]
) -> int:
    """A row for each publication `not_taken_up`, due `verify_after(recipe)` after it; a
    second replica's insert is ignored."""
    made = 0
    for receipt in not_taken_up(session, now)[:TAKE_UP_BATCH]:
        post = published_post(receipt)
        proof = receipt.external_id or ""  # not_taken_up keeps receipts holding one
        marked = is_manual_proof(proof)  # no post id: nothing to read back
        made += insert_ignore(
            session,
            PostCheckRow,
            receipt=receipt.key,
            recipe=post.recipe,
            target=post.target,
            external_id=receipt.external_id,
            url=post.url,
            published_at=post.published_at,
            state=PostCheck.MARKED if marked else PostCheck.DUE,
            due_at=None if marked else post.published_at + verify_after(post.recipe),
            tries=0,
            readings_done=0,
            detail=marked_detail(proof) if marked else None,
        )
    return made


@dataclass(frozen=True)
class PublishedPost:
    """What a publish receipt says of its post, before (or as) its row is written."""

    recipe: str
    target: str
    url: str | None
    published_at: datetime


def published_post(receipt: EffectRow) -> PublishedPost:
    return PublishedPost(
        recipe=recipe_of_run(run_of_draft_key(receipt.draft_key)),
        target=target_of_publish_key(receipt.key),
        url=_public_url(receipt.result),
        published_at=receipt.updated_at,
    )


def read_back_of(session: Session, receipts: Sequence[EffectRow]) -> dict[str, str]:
    """Each succeeded publication's read-back state in words, by receipt key (a thread
    is read back by its first post: its other parts have none)."""
    firsts = [
        r.key
        for r in receipts
        if r.step == EffectStep.PUBLISH
        and r.state == EffectState.SUCCEEDED
        and part_of_publish_key(r.key) == 1
    ]
    if not firsts:
        return {}
    states = dict(
        session.exec(
            select(PostCheckRow.receipt, PostCheckRow.state).where(
                col(PostCheckRow.receipt).in_(firsts)
            )
        ).all()
    )
    return {key: READ_BACK_WORDS[PostCheck(states.get(key, PostCheck.DUE))] for key in firsts}


def not_taken_up(session: Session, now: datetime) -> list[EffectRow]:
    """The publications succeeded within TAKE_UP_WITHIN that have no row yet, oldest
    first: a thread's first post only (it is read back and counted for the thread). Only
    the publications since the newest row (less TAKE_UP_OVERLAP) are read: a pass, or
    `galley stats` before the pass, costs the last minutes' publications, not the day's."""
    since = now - TAKE_UP_WITHIN
    newest = session.exec(
        select(sa.func.max(PostCheckRow.published_at)).where(
            col(PostCheckRow.published_at) > since  # ix_post_checks_published, bounded
        )
    ).one()
    if newest is not None:  # from the newest taken up, less what may have committed late
        since = max(since, newest - TAKE_UP_OVERLAP)
    recent = session.exec(  # ix_effects_published: publications since then
        select(EffectRow)
        .where(sa.text(PUBLISHED_RECEIPT), col(EffectRow.updated_at) > since)
        .order_by(col(EffectRow.updated_at))
    ).all()
    if not recent:
        return []
    taken = set(
        session.exec(
            select(PostCheckRow.receipt).where(
                col(PostCheckRow.receipt).in_([r.key for r in recent])
            )
        ).all()
    )
    return [
        r
        for r in recent
        if r.key not in taken and r.external_id and part_of_publish_key(r.key) == 1
    ]


def marked_detail(external_id: str) -> str:
    """What a receipt a person marked published says instead of a reading."""
    actor = external_id.removeprefix(MANUAL_PROOF)
    return f"marked published by {actor}; not read back"


def claim_due(session: Session, now: datetime, owner: str, limit: int) -> list[PostCheckRow]:
    """The rows due now, claimed by `owner`: their `due_at` moves CLAIM_FOR on, guarded
    by `due_at <= now`, so a row another pass claimed first (its `due_at` already moved)
    matches no more; on PostgreSQL the guard is judged again on the row as committed."""
    due = (
        select(PostCheckRow.receipt)
        .where(col(PostCheckRow.due_at).is_not(None), col(PostCheckRow.due_at) <= now)
        .order_by(col(PostCheckRow.due_at))
        .limit(limit)
    )
    receipts = list(session.exec(due).all())
    if not receipts:
        return []
    failpoint(Failpoint.READINGS_DUE_READ)
    session.execute(
        sa.update(PostCheckRow)
        .where(col(PostCheckRow.receipt).in_(receipts), col(PostCheckRow.due_at) <= now)
        .values(due_at=now + CLAIM_FOR, claimed_by=owner)
    )
    return list(
        session.exec(
            select(PostCheckRow).where(
                col(PostCheckRow.receipt).in_(receipts), col(PostCheckRow.claimed_by) == owner
            )
        ).all()
    )


def finish(session: Session, row: PostCheckRow, owner: str, **values: Any) -> bool:
    """Write a claimed row's outcome, fenced by its owner token: False when another pass
    claimed it since (its claim ran out), and nothing is written."""
    written = session.execute(
        sa.update(PostCheckRow)
        .where(col(PostCheckRow.receipt) == row.receipt, col(PostCheckRow.claimed_by) == owner)
        .values(claimed_by=None, **values)
    )
    return bool(getattr(written, "rowcount", 0))


def keep_reading(
    session: Session,
    row: PostCheckRow,
    owner: str,
    counts: PostCounts,
    now: datetime,
    schedule: Schedule,
) -> bool:
    """One reading kept under the label of the offset it was due at, and the row made
    due at the next offset (or never again); False when the claim was lost. A row past
    every offset the config names now (its `engagement_at` shortened) ends unread."""
    if row.readings_done >= len(schedule.engagement_at):
        return finish(session, row, owner, due_at=None)
    index = schedule.reading_now(row.published_at, row.readings_done, now)
    offset = schedule.engagement_at[index]
    done = index + 1
    if not finish(
        session,
        row,
        owner,
        readings_done=done,
        tries=0,
        detail=None,
        due_at=schedule.next_reading(row.published_at, done),
    ):
        return False
    insert_ignore(
        session,
        PostReadingRow,
        receipt=row.receipt,
        label=label_of(offset),
        after_seconds=int(offset.total_seconds()),
        recipe=row.recipe,
        target=row.target,
        read_at=now,
        likes=counts.likes,
        reposts=counts.reposts,
        replies=counts.replies,
        quotes=counts.quotes,
        impressions=counts.impressions,
        note=counts.note,
    )
    return True


def read_again(
    session: Session,
    row: PostCheckRow,
    owner: str,
    now: datetime,
    why: PostUnknown,
    schedule: Schedule,
) -> bool:
    """A read that could not tell: due again after the backoff, but never past the row's
    `read_until`; read in vain at that time, the row ends (a post never verified is
    `unconfirmed`), so every row reaches an end. False when the claim was lost."""
    tries = row.tries + 1
    until = schedule.read_until(row.published_at)
    if now >= until:
        state = PostCheck.UNCONFIRMED if row.state == PostCheck.DUE else row.state
        ended = f"not read by {until:%Y-%m-%d %H:%M} UTC: {why.why}"
        return finish(session, row, owner, state=state, tries=tries, detail=ended, due_at=None)
    due_at = min(now + retry_delay(tries, why.retry_after), until)
    return finish(session, row, owner, tries=tries, detail=why.why, due_at=due_at)


def chunks(rows: Sequence[PostCheckRow], size: int) -> list[Sequence[PostCheckRow]]:
    size = max(size, 1)
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def _public_url(result: str | None) -> str | None:
    try:
        url = json.loads(result or "{}").get(PUBLIC_URL)
    except (ValueError, AttributeError):
        return None
    return url if isinstance(url, str) else None
