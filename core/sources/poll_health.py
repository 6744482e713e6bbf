"""How an items recipe's polls are going (`item_polls`, docs/design.md §29): the latest
poll's time and outcome, and the failing episode its one alert is keyed by. Written in the
poll's own transaction with the recipe row locked, so two replicas count a failure once.
Decides when a failure is people's to fix; never posts anything, never reads a source.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from core.models import ItemPollRow
from core.policies import PollOutcome

FAILURES_ALERTED = 3  # failed polls in a row that are people's to look at, whatever the cause
FAILING_ALERTED = timedelta(hours=1)  # or failing this long (a poll every few hours)


@dataclass(frozen=True)
class PollFailure:
    """A poll whose source could not be read (three tries): its answer, and whether a later
    poll may read it (a timeout, a 5xx) or a person must fix it (401, 403, 404)."""

    detail: str
    retryable: bool


def note_poll(
    session: Session, recipe: str, now: datetime, failure: PollFailure | None = None
) -> ItemPollRow:
    """Record one poll's outcome; the caller holds the recipe row's lock. A failure opens
    or continues the episode; a read ends it (its alert is then settled)."""
    row = session.get(ItemPollRow, recipe)
    if row is None:
        row = ItemPollRow(recipe=recipe, polled_at=now, outcome=PollOutcome.READ)
        session.add(row)
    row.polled_at = now
    if failure is None:
        if row.failing_since is not None:
            row.ended_since = row.failing_since
        row.outcome, row.detail, row.failures = PollOutcome.READ, None, 0
        row.failing_since, row.lasting = None, False
    else:
        row.outcome, row.detail = PollOutcome.FAILED, failure.detail
        row.failures += 1
        row.failing_since = row.failing_since or now
        row.lasting = row.lasting or not failure.retryable
    session.flush()
    return row


def note_reissue(row: ItemPollRow, title: str, link: str | None, now: datetime) -> None:
    """An entry this poll did not draft, as a re-issue of a known item (docs/design.md §29):
    kept on the recipe's poll row until a later one, so `galley status` and Home say it
    (a daily report linking one page under one title is never posted: people must know)."""
    row.reissued_at, row.reissued = now, title + (f" <{link}>" if link else "")


def is_alert_due(row: ItemPollRow, now: datetime) -> bool:
    """A failing episode is people's to fix: a failure waiting cannot fix, or
    FAILURES_ALERTED failed polls in a row, or FAILING_ALERTED of failing."""
    if row.failing_since is None:
        return False
    lasted = now - row.failing_since >= FAILING_ALERTED
    return row.lasting or row.failures >= FAILURES_ALERTED or lasted


def polls_to_tell(session: Session) -> list[ItemPollRow]:
    """Rows with an episode under way or one that ended (one row per items recipe)."""
    return list(
        session.exec(
            select(ItemPollRow).where(
                col(ItemPollRow.failing_since).is_not(None)
                | col(ItemPollRow.ended_since).is_not(None)
            )
        ).all()
    )


def latest_polls(session: Session, recipes: list[str]) -> dict[str, ItemPollRow]:
    """Each of these recipes' latest poll, by primary key."""
    if not recipes:
        return {}
    rows = session.exec(select(ItemPollRow).where(col(ItemPollRow.recipe).in_(recipes))).all()
    return {row.recipe: row for row in rows}
