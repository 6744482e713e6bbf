"""The lines a review message shows above its buttons: how much the draft reads like a
post people already saw ("82% similar to the post published on 2 Nov", linked), and the
recipe's record with reviewers. Pure functions; outside text is escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from bot.mrkdwn import escape_mrkdwn
from core.ports import Fit, MessageRef, PublishedLink, RecipeRecord, ReviewItem, SimilarPost
from core.states import DraftState

REASON_SHOWN = 200  # characters of the last rejection reason
Permalink = Callable[[MessageRef], str | None]

_SEEN_AS = {
    DraftState.PUBLISHED: ("the post published", "on"),
    DraftState.APPROVED: ("the draft approved", "on"),
    DraftState.READY: ("a draft waiting for review", "since"),
    DraftState.REJECTED: ("the draft rejected", "on"),
}


def fact_lines(item: ReviewItem, permalink: Permalink | None = None) -> tuple[str, ...]:
    lines = []
    if item.fits:
        lines.append(fit_line(item.fits))
    if item.published:
        lines.append(published_line(item.published))
    if item.similar is not None:
        lines.append(similar_line(item.similar, permalink))
    if item.record is not None:
        lines.append(record_line(item.record))
    return tuple(lines)


def fit_line(fits: Sequence[Fit]) -> str:
    """`Bluesky 287/300 · Mastodon 512/500 ✗`: each target's count against its limit."""
    return " · ".join(
        f"{escape_mrkdwn(f.label)} {f.count}/{f.limit}" + ("" if f.fits else " ✗") for f in fits
    )


def published_line(links: Sequence[PublishedLink]) -> str:
    """`:link: Published: <url|bluesky:acme.bsky.social> · <url|mastodon:…>`"""
    shown = (f"<{_url(link.url)}|{escape_mrkdwn(link.target)}>" for link in links)
    return ":link: Published: " + " · ".join(shown)


def _url(url: str) -> str:
    """A URL inside `<…|…>`: the characters that would end the link are escaped."""
    return url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")


def similar_line(similar: SimilarPost, permalink: Permalink | None = None) -> str:
    """`:warning: *82% similar* to the post published on 2 Nov`, the phrase linked to
    that message when its place is known."""
    what, preposition = _SEEN_AS.get(
        DraftState(similar.state), (f"the draft {similar.state}", "on")
    )
    link = permalink(similar.message) if permalink and similar.message else None
    shown = f"<{link}|{what}>" if link else what
    return f":warning: *{similar.score}% similar* to {shown} {preposition} {slack_day(similar.at)}"


def record_line(record: RecipeRecord) -> str:
    """`weekly-update, last 30 days: 3 of 4 approved (75%) · last rejected 2 Nov: “…”`"""
    name = escape_mrkdwn(record.recipe)
    if record.approval_rate is None:
        tally = f"no decisions in the last {record.days} days"
    else:
        tally = (
            f"last {record.days} days: {record.approved} of {record.decided} approved "
            f"({record.approval_rate:.0%})"
        )
    line = f":bar_chart: *{name}*, {tally}"
    if record.last_rejected_at is not None:
        line += f" · last rejected {slack_day(record.last_rejected_at)}"
        reason = record.last_rejection_reason
        line += f": “{escape_mrkdwn(_clip(reason))}”" if reason else " (no reason given)"
    return line


def slack_day(moment: datetime) -> str:
    """A day in each reader's own zone; `2 Nov 2026` (UTC) where Slack cannot format."""
    return f"<!date^{int(moment.timestamp())}^{{date_short}}|{moment:%-d %b %Y}>"


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= REASON_SHOWN else flat[:REASON_SHOWN].rstrip() + "…"
