"""The items an items recipe's polls have seen (`polled_items`, docs/design.md §29): which
of a poll's items are known, which are a re-issue of a known one (same link and title,
new id), and what a run's item says. Every read is by index, so a poll costs its own
items, not the history. Knows nothing of runs' states; never reads a source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from core.identity import item_run_id, item_token
from core.models import PolledItemRow, PolledSourceRow
from core.policies import ItemFate
from core.sources.items import ItemImage, SourceItem
from core.store.engine import insert_ignore

IN_BATCH = 500  # ids per IN list: a poll's items in one or two index probes


@dataclass(frozen=True)
class ItemLabel:
    """An item run as people are shown it: its item's title and link."""

    title: str
    link: str | None


@dataclass(frozen=True)
class PlannedItem:
    """An item a poll has not seen, and what it becomes: its run (a re-issue: its first's)."""

    item: SourceItem
    fate: ItemFate
    run_id: str
    token: str  # the run id's item token (a re-issue: its own, unused)
    same_as: str | None = None  # a re-issue: the first item's id


@dataclass(frozen=True)
class PollPlan:
    """What one poll's items come to, oldest first: the one rule `record_poll` writes and
    `galley sources` shows."""

    unseen: tuple[PlannedItem, ...] = ()
    known: int = 0  # items an earlier poll recorded
    first_poll: bool = False


def plan_poll(
    session: Session,
    recipe: str,
    source: str,
    items: Sequence[SourceItem],
    *,
    first_poll: bool,
    backfill: int,
) -> PollPlan:
    """Each unseen item (the first place of an id a feed lists twice) as a new run, a
    `backfill` skip at a first poll (all but the newest `backfill`), or a re-issue of a
    known item (or of an older one in this poll) by its link and title. Items recorded
    under an earlier name of the source are known: see `names_of_source`."""
    first_of_id: dict[str, SourceItem] = {}
    for item in items:
        first_of_id.setdefault(item.item_id, item)
    unique = list(first_of_id.values())
    if not unique:
        return PollPlan(first_poll=first_poll)
    ids = [item.item_id for item in unique]
    known = known_item_ids(session, recipe, source, ids)
    unknown = [item for item in unique if item.item_id not in known]
    names = names_of_source(session, recipe, source, unknown)
    for earlier in names[1:]:
        known |= known_item_ids(session, recipe, earlier, [i for i in ids if i not in known])
    first_poll = first_poll and len(names) == 1  # a source renamed is not a new source
    fresh = [item for item in unique if item.item_id not in known]
    drafted_now = {item.item_id for item in fresh[:backfill]} if first_poll else None
    identities = [ident for item in fresh if (ident := item_identity(item)) is not None]
    firsts = {
        ident: (row.item_id, row.run_id)
        for name in reversed(names)  # a first under this name wins over an earlier one's
        for ident, row in firsts_by_identity(session, recipe, name, identities).items()
    }
    planned: list[PlannedItem] = []
    for item in reversed(fresh):  # oldest first: runs are made, and drafted, in item order
        ident, token = item_identity(item), item_token(item.item_id)
        if ident is not None and ident in firsts:
            first_id, first_run = firsts[ident]
            planned.append(PlannedItem(item, ItemFate.REISSUE, first_run, token, first_id))
            continue
        run_id = item_run_id(recipe, token)
        if ident is not None:
            firsts[ident] = (item.item_id, run_id)
        backfilled = drafted_now is not None and item.item_id not in drafted_now
        fate = ItemFate.BACKFILL if backfilled else ItemFate.NEW
        planned.append(PlannedItem(item, fate, run_id, token))
    return PollPlan(tuple(planned), len(known), first_poll)


def names_of_source(
    session: Session, recipe: str, source: str, unknown: Sequence[SourceItem]
) -> list[str]:
    """The source's name, then the earlier names it was polled under: those under which the
    recipe recorded an item of this poll's, unknown by this name, with the same id and
    title (found by its run id, which an item's id alone makes: ix_polled_items_run). A
    `name` added, or a feed moved to another host, changes the name its items are keyed
    by, not the items: one recorded before is known, and the poll is no first poll. A
    source replaced by another whose ids happen to match (`pull:1` of another repository)
    is told apart by its titles: its first poll backfills."""
    titles = {item.item_id: item.title.strip() for item in unknown}
    runs = [item_run_id(recipe, item_token(item_id)) for item_id in titles]
    earlier: set[str] = set()
    for start in range(0, len(runs), IN_BATCH):
        rows = session.exec(
            select(PolledItemRow.source, PolledItemRow.item_id, PolledItemRow.title).where(
                col(PolledItemRow.run_id).in_(runs[start : start + IN_BATCH]),
                col(PolledItemRow.recipe) == recipe,
                col(PolledItemRow.source) != source,
            )
        ).all()
        earlier.update(name for name, id_, title in rows if titles.get(id_) == title.strip())
    return [source, *sorted(earlier)]


def item_identity(item: SourceItem) -> str | None:
    """What makes a re-issued item the same item: its link and title. An item without a
    link has none (a title alone, "Weekly notes", is no identity)."""
    if not item.link:
        return None
    digest = hashlib.sha256()
    for part in (item.link.strip(), item.title.strip()):
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def known_item_ids(session: Session, recipe: str, source: str, ids: Sequence[str]) -> set[str]:
    """The ids among `ids` a poll of this recipe's source already recorded (primary key)."""
    found: set[str] = set()
    for start in range(0, len(ids), IN_BATCH):
        found.update(
            session.exec(
                select(PolledItemRow.item_id).where(
                    col(PolledItemRow.recipe) == recipe,
                    col(PolledItemRow.source) == source,
                    col(PolledItemRow.item_id).in_(ids[start : start + IN_BATCH]),
                )
            ).all()
        )
    return found


def firsts_by_identity(
    session: Session, recipe: str, source: str, identities: Iterable[str]
) -> dict[str, PolledItemRow]:
    """The first item recorded under each identity (ix_polled_items_identity)."""
    wanted = sorted(set(identities))
    found: dict[str, PolledItemRow] = {}
    for start in range(0, len(wanted), IN_BATCH):
        rows = session.exec(
            select(PolledItemRow).where(
                col(PolledItemRow.recipe) == recipe,
                col(PolledItemRow.source) == source,
                col(PolledItemRow.identity).in_(wanted[start : start + IN_BATCH]),
                col(PolledItemRow.same_as).is_(None),
            )
        ).all()
        found.update((row.identity, row) for row in rows if row.identity is not None)
    return found


def was_polled(session: Session, recipe: str, source: str) -> bool:
    """Whether a poll of this recipe's source was recorded (a read: `galley sources`)."""
    return session.get(PolledSourceRow, (recipe, source)) is not None


def first_poll_of(session: Session, recipe: str, source: str, now: datetime) -> bool:
    """Whether this is the first poll of this recipe's source: the database decides, by
    the `polled_sources` key, so an empty first poll still counts as one."""
    return insert_ignore(
        session, PolledSourceRow, recipe=recipe, source=source, first_polled_at=now
    )


def record_item(
    session: Session,
    recipe: str,
    item: SourceItem,
    *,
    run_id: str,
    now: datetime,
    same_as: str | None = None,
) -> bool:
    """Record one item (or a re-issue, `same_as` its first); True when this call did. A
    first whose identity another first holds is not recorded (the unique index)."""
    return insert_ignore(
        session,
        PolledItemRow,
        recipe=recipe,
        source=item.source,
        item_id=item.item_id,
        run_id=run_id,
        same_as=same_as,
        identity=None if same_as is not None else item_identity(item),
        title=item.title,
        link=item.link,
        published_at=item.published_at,
        text=item.text,
        seen_at=now,
        image_url=item.image.url if item.image is not None else None,
        image_caption=item.image.caption if item.image is not None else None,
    )


def item_of_run(session: Session, run_id: str) -> SourceItem | None:
    """The item an item run drafts from, as its first poll recorded it: a later edit of
    the item is not a new run, and does not change what the run was about."""
    row = session.exec(
        select(PolledItemRow).where(
            col(PolledItemRow.run_id) == run_id, col(PolledItemRow.same_as).is_(None)
        )
    ).first()
    if row is None:
        return None
    return SourceItem(
        source=row.source,
        item_id=row.item_id,
        title=row.title,
        link=row.link,
        published_at=row.published_at,
        text=row.text,
        image=ItemImage(row.image_url, row.image_caption or "") if row.image_url else None,
    )


def labels_of_runs(session: Session, run_ids: Iterable[str]) -> dict[str, ItemLabel]:
    """Each item run's title and link, for the surfaces that list runs (ix_polled_items_run);
    a slot's run has none."""
    wanted = sorted(set(run_ids))
    labels: dict[str, ItemLabel] = {}
    for start in range(0, len(wanted), IN_BATCH):
        rows = session.exec(
            select(PolledItemRow.run_id, PolledItemRow.title, PolledItemRow.link).where(
                col(PolledItemRow.run_id).in_(wanted[start : start + IN_BATCH]),
                col(PolledItemRow.same_as).is_(None),
            )
        ).all()
        labels.update((run, ItemLabel(title, link)) for run, title, link in rows)
    return labels
