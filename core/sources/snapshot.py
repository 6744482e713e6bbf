"""A run's snapshot (docs/design.md §27): the items it drafts from, stored with the run
once, before the model is paid for, and read back by every later attempt, take-over,
batch entry and redraft instead of the network.

The caller holds the run's claim and writes inside its fenced transaction: a holder
killed between reading and storing leaves nothing, and the next holder reads again. An
undated item is new the first time its recipe sees it; that sighting is stored in the
same transaction. Nothing here reads a source or calls the model.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlmodel import Session, col, select

from core.failpoints import Failpoint, failpoint
from core.models import SeenSourceItemRow, SnapshotItemRow, SourceSnapshotRow
from core.sources.items import ItemImage, SourceItem, Window
from core.store.engine import insert_ignore

# A snapshot read this long after its window's end was drafted late (an earlier slot by
# hand): newer entries exist that it leaves out, and its message says so.
READ_LATE_AFTER = timedelta(minutes=10)


@dataclass(frozen=True)
class Example:
    """A published post that did well: its text, where and when it went out, its score."""

    text: str
    target: str
    published_at: str  # ISO 8601, UTC
    score: int


@dataclass(frozen=True)
class Ask:
    """What a reviewer asked: a rejection's reason or a redraft's note."""

    kind: str  # "rejection" or "redraft"
    text: str


@dataclass(frozen=True)
class Lessons:
    """What a `learn_from = "top"` run was shown beside its sources (docs/design.md §27),
    kept with its snapshot as JSON; reading it from the history is
    core/drafting/learning.py's."""

    examples: tuple[Example, ...] = ()
    asks: tuple[Ask, ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {"examples": [asdict(e) for e in self.examples], "asks": [asdict(a) for a in self.asks]}
        )

    @classmethod
    def from_json(cls, stored: str) -> Lessons:
        data = json.loads(stored)
        return cls(
            examples=tuple(Example(**example) for example in data["examples"]),
            asks=tuple(Ask(**ask) for ask in data["asks"]),
        )


@dataclass(frozen=True)
class LeftOut:
    """An optional source that could not be read: the run drafts without it, and says so."""

    source: str
    answer: str  # one line: the status and what the server said
    retryable: bool = True  # not stored: whether a later read may pass (a poll's alert asks)

    def line(self) -> str:
        return f"{self.source}: {self.answer}"


@dataclass(frozen=True)
class Snapshot:
    """What one run drafts from: its items in the order the model sees them, the
    optional sources left out, and what a `learn_from` recipe learns from."""

    items: tuple[SourceItem, ...] = ()
    left_out: tuple[LeftOut, ...] = ()
    lessons: Lessons | None = None
    window_end: datetime | None = None  # stored: the end of the window it was read for
    taken_at: datetime | None = None  # stored: when it was read

    def closed_before_read(self) -> datetime | None:
        """The window's end when the snapshot was read well after it (a late draft of an
        earlier slot): entries dated after it were left out, for their own slot."""
        if self.window_end is None or self.taken_at is None:
            return None
        return self.window_end if self.taken_at - self.window_end > READ_LATE_AFTER else None

    @property
    def empty(self) -> bool:
        return not self.items


def stored_snapshot(session: Session, run_id: str) -> Snapshot | None:
    """The run's stored snapshot, or None when none was taken yet (an empty one is not
    None: its window held nothing)."""
    taken = session.get(SourceSnapshotRow, run_id)
    if taken is None:
        return None
    rows = session.exec(
        select(SnapshotItemRow)
        .where(col(SnapshotItemRow.run_id) == run_id)
        .order_by(col(SnapshotItemRow.position))
    ).all()
    return Snapshot(
        items=tuple(_item(row) for row in rows),
        left_out=_parse_left_out(taken.left_out),
        lessons=Lessons.from_json(taken.lessons) if taken.lessons is not None else None,
        window_end=taken.window_end,
        taken_at=taken.taken_at,
    )


def store_snapshot(
    session: Session,
    *,
    recipe: str,
    run_id: str,
    owner: str,
    window: Window,
    read: Snapshot,
    now: datetime,
) -> Snapshot:
    """Store what was read as the run's snapshot, in the caller's fenced transaction, and
    return what was stored: undated items seen by an earlier run of the recipe are left
    out. A snapshot already stored for the run wins (it is returned unchanged)."""
    if not insert_ignore(
        session,
        SourceSnapshotRow,
        run_id=run_id,
        taken_by=owner,
        taken_at=now,
        window_start=window.start,
        window_end=window.end,
        left_out=json.dumps([[gone.source, gone.answer] for gone in read.left_out]),
        lessons=read.lessons.to_json() if read.lessons is not None else None,
    ):
        stored = stored_snapshot(session, run_id)
        assert stored is not None
        return stored
    kept = tuple(item for item in read.items if _new_to(session, recipe, run_id, item, now))
    for position, item in enumerate(kept):
        session.add(_row(run_id, position, item))
    session.flush()
    return Snapshot(items=kept, left_out=read.left_out, lessons=read.lessons)


def _new_to(session: Session, recipe: str, run_id: str, item: SourceItem, now: datetime) -> bool:
    """A dated item is new when its date is in the window (the reader checked). An undated
    one is new to the run that first sees it, and to no later run until its content
    changes: the database decides which run was first, by the sighting's key, and an
    edit moves the sighting to this run only if no other run moved it first."""
    if item.published_at is not None:
        return True
    digest = item.content_hash
    if insert_ignore(
        session,
        SeenSourceItemRow,
        recipe=recipe,
        source=item.source,
        item_id=item.item_id,
        content_hash=digest,
        first_run_id=run_id,
        first_seen_at=now,
    ):
        return True
    seen = session.get(SeenSourceItemRow, (recipe, item.source, item.item_id))
    failpoint(Failpoint.SEEN_ITEM_READ)  # tests: another run's edit of it, committed here
    if seen is None or seen.first_run_id == run_id:
        return seen is not None
    if seen.content_hash == digest:
        return False
    edited = session.execute(
        sa.update(SeenSourceItemRow)
        .where(
            col(SeenSourceItemRow.recipe) == recipe,
            col(SeenSourceItemRow.source) == item.source,
            col(SeenSourceItemRow.item_id) == item.item_id,
            col(SeenSourceItemRow.content_hash) == seen.content_hash,
        )
        .values(content_hash=digest, first_run_id=run_id, first_seen_at=now)
        .returning(col(SeenSourceItemRow.item_id))
    )
    return edited.first() is not None


def _row(run_id: str, position: int, item: SourceItem) -> SnapshotItemRow:
    return SnapshotItemRow(
        run_id=run_id,
        position=position,
        source=item.source,
        item_id=item.item_id,
        title=item.title,
        link=item.link,
        published_at=item.published_at,
        text=item.text,
        content_hash=item.content_hash,
        image_url=item.image.url if item.image is not None else None,
        image_caption=item.image.caption if item.image is not None else None,
        image_sha256=item.image.sha256 if item.image is not None else None,
        image_note=item.image.note or None if item.image is not None else None,
    )


def _item(row: SnapshotItemRow) -> SourceItem:
    return SourceItem(
        source=row.source,
        item_id=row.item_id,
        title=row.title,
        link=row.link,
        published_at=row.published_at,
        text=row.text,
        image=_image(row),
    )


def _image(row: SnapshotItemRow) -> ItemImage | None:
    if row.image_url is None:
        return None
    return ItemImage(row.image_url, row.image_caption or "", row.image_sha256, row.image_note or "")


def _parse_left_out(stored: str) -> tuple[LeftOut, ...]:
    return tuple(LeftOut(str(source), str(answer)) for source, answer in json.loads(stored or "[]"))
