"""The lines a review message shows above its buttons: how much the draft reads like a
post people already saw ("82% similar to the post published on 2 Nov", linked), and the
recipe's record with reviewers. Pure functions; outside text is escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from bot.blocks import mention_user, slack_date
from bot.mrkdwn import escape_mrkdwn, inert
from core.ports import (
    ApprovalProgress,
    BasisItem,
    DraftBasis,
    Fit,
    MessageRef,
    PublishedLink,
    RecipeRecord,
    RedraftNote,
    ReviewItem,
    SimilarPost,
)
from core.states import DraftState

REASON_SHOWN = 200  # characters of the last rejection reason
NOTE_SHOWN = 300  # characters of a redraft note
NAME_SHOWN = 100  # characters of one approver's id shown
BASIS_SHOWN = 4  # source items named in "Based on N items" (all of them are counted)
TITLE_SHOWN = 80  # characters of one item's title
LINK_SHOWN = 400  # a longer link is left off: the line stays within a context's 3,000
Permalink = Callable[[MessageRef], str | None]

_SEEN_AS = {
    DraftState.PUBLISHED: ("the post published", "on"),
    DraftState.APPROVED: ("the draft approved", "on"),
    DraftState.READY: ("a draft waiting for review", "since"),
    DraftState.REJECTED: ("the draft rejected", "on"),
}


def fact_lines(item: ReviewItem, permalink: Permalink | None = None) -> tuple[str, ...]:
    lines = []
    if item.basis is not None:
        lines.append(basis_line(item.basis))
        lines += [image_note_line(note) for note in item.basis.image_notes]
    if item.redrafted is not None and item.redrafted.revision == item.revision:
        lines.append(redraft_line(item.redrafted))
    if item.approvals is not None and item.state == DraftState.READY:
        lines.append(approval_line(item.approvals))
    if item.fits:
        lines.append(fit_line(item.fits))
    if item.published:
        lines.append(published_line(item.published))
    lines += [f":warning: {escape_mrkdwn(gone)}" for gone in item.gone]
    if item.similar is not None:
        lines.append(similar_line(item.similar, permalink))
    if item.record is not None:
        lines.append(record_line(item.record))
    return tuple(lines)


def basis_line(basis: DraftBasis) -> str:
    """`:page_facing_up: Based on 4 items: Release v2.3 · Fix login on Safari · …`, each
    title linked where the item has a web link; the optional sources left out named."""
    count = len(basis.items)
    if not count:
        line = ":page_facing_up: Based on no items: the sources had nothing new"
    else:
        shown = " · ".join(_basis_title(item) for item in basis.items[:BASIS_SHOWN])
        more = " · …" if count > BASIS_SHOWN else ""
        line = f":page_facing_up: Based on {count} item{'' if count == 1 else 's'}: {shown}{more}"
    if basis.left_out:
        names = ", ".join(inert(name, NAME_SHOWN) for name in basis.left_out)
        line += f" · left out (could not be read): {names}"
    if basis.closed_at is not None:
        line += (
            f" · drafted late: entries after {slack_date(basis.closed_at)} are left out, "
            "they belong to the next slot"
        )
    return line


def image_note_line(note: str) -> str:
    """`:frame_with_picture: Drafted without the item's image: the image at … answered 404`."""
    return f":frame_with_picture: Drafted without the item's image: {inert(note, NOTE_SHOWN)}"


def _basis_title(item: BasisItem) -> str:
    title = inert(item.title, TITLE_SHOWN)
    link = item.link or ""
    if link.startswith(("https://", "http://")) and len(link) <= LINK_SHOWN:
        return f"<{_url(link)}|{title}>"
    return title


def fit_line(fits: Sequence[Fit]) -> str:
    """`Bluesky 287/300 · Mastodon 512/500 ✗`: each target's count against its limit. A
    thread's parts (each counted beside its text, docs/design.md §30) are summed up: the
    parts over a limit, then how many fit."""
    if len({f.target for f in fits}) == len(fits):
        return " · ".join(_fit(f) for f in fits)
    over = [f for f in fits if not f.fits]
    return " · ".join(
        [*(_fit(f) for f in over), f"{len(fits) - len(over)} of {len(fits)} parts fit"]
    )


def _fit(fit: Fit) -> str:
    return f"{escape_mrkdwn(fit.label)} {fit.count}/{fit.limit}" + ("" if fit.fits else " ✗")


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


def redraft_line(note: RedraftNote) -> str:
    """`:repeat: Revision 2 · redrafted for @ana: “shorter, mention the launch date”`"""
    who = person(note.requested_by)
    shown = escape_mrkdwn(_clip(note.note, NOTE_SHOWN))
    return f":repeat: Revision {note.revision} · redrafted for {who}: “{shown}”"


def approval_line(progress: ApprovalProgress) -> str:
    """`:ballot_box_with_check: Approvals 1 of 2: @ana · may still approve: @ben, S0EDITORS`"""
    if progress.stages > 1:
        return _stage_line(progress)
    done = ", ".join(person(p) for p in progress.approvers) or "none yet"
    count = f"{len(progress.approvers)} of {progress.required}"
    line = f":ballot_box_with_check: Approvals {count}: {done}"
    if progress.anyone:
        return line + " · anyone else may approve"
    if progress.may_still:
        return line + " · may still approve: " + ", ".join(person(p) for p in progress.may_still)
    return line + " · nobody listed is left to approve"


def _stage_line(progress: ApprovalProgress) -> str:
    """`:ballot_box_with_check: Stage 2 of 2 (legal): approved by editor @x; asking @lawyer`
    (docs/design.md §22): the stage waiting, who passed the stages before it, who is asked."""
    where = f"Stage {progress.stage_number} of {progress.stages} ({escape_mrkdwn(progress.stage)})"
    passed = [
        f"{escape_mrkdwn(stage)} {', '.join(person(p) for p in people)}"
        for stage, people in progress.earlier
    ]
    if progress.approvers:
        here = ", ".join(person(p) for p in progress.approvers)
        passed.append(f"{len(progress.approvers)} of {progress.required} here {here}")
    parts = [f"approved by {'; '.join(passed)}"] if passed else []
    if progress.anyone:
        parts.append("anyone allowed may approve")
    elif progress.may_still:
        parts.append("asking " + ", ".join(person(p) for p in progress.may_still))
    else:
        parts.append("nobody listed is left to approve")
    return f":ballot_box_with_check: {where}: " + "; ".join(parts)


def person(slack_id: str) -> str:
    """A user as a mention; a user group (or anything else) as inert text, so a progress
    line never notifies a whole group."""
    if slack_id.startswith(("U", "W")):
        return mention_user(slack_id)
    return inert(slack_id, NAME_SHOWN)


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


def _clip(text: str, limit: int = REASON_SHOWN) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + "…"
