"""The daily digest (core/operations/digest.py) as Slack mrkdwn: one bullet line per finding."""

from __future__ import annotations

from bot.mrkdwn import escape_mrkdwn
from core.operations.digest import Digest
from core.publishing.engagement import PostStats
from core.review.feedback import RecipeFeedback


def digest_text(digest: Digest) -> str:
    lines = [f"*Galley daily digest* · {digest.at:%Y-%m-%d %H:%M} UTC"]
    if digest.stuck:
        runs = (f"{_code(r.run_id)} ({r.state} since {r.since:%m-%d %H:%M})" for r in digest.stuck)
        lines.append(f"• Needs a person: {', '.join(runs)}")
    else:
        lines.append("• Nothing stuck or uncertain.")
    if digest.missed:
        missed = ", ".join(_code(run_id) for run_id in digest.missed)
        lines.append(f"• Approved drafts that missed their time (24h): {missed}")
    if digest.failing:
        failing = (f"{_bold(name)} x{count}" for name, count in digest.failing.items())
        lines.append(f"• Failing repeatedly (24h): {', '.join(failing)}")
    if digest.skipped:
        skipped = (f"{escape_mrkdwn(reason)} {n}" for reason, n in digest.skipped.items())
        lines.append(f"• Skipped (24h): {', '.join(skipped)}")
    if digest.no_news:
        quiet = (f"{_bold(name)} {n}" for name, n in digest.no_news.items())
        lines.append(f"• Nothing new in their sources (no_news, 24h): {', '.join(quiet)}")
    if digest.stale_items:
        stale = (f"{_bold(name)} {n}" for name, n in digest.stale_items.items())
        lines.append(f"• Items that waited past item_ttl (stale_item, 24h): {', '.join(stale)}")
    if digest.expiring:
        soon = (f"{_code(d.run_id)} (expires {d.expires:%m-%d %H:%M} UTC)" for d in digest.expiring)
        lines.append(f"• About to expire unreviewed: {', '.join(soon)}")
    if digest.expired_unread:
        unread = (f"{_bold(name)} {n}" for name, n in digest.expired_unread.items())
        lines.append(f"• Expired with nobody's click (24h): {', '.join(unread)}")
    if digest.approvals:
        rates = (
            f"{_bold(name)} {approved}/{total} ({approved / total:.0%})"
            for name, (approved, total) in digest.approvals.items()
        )
        lines.append(f"• Approved over 30 days: {', '.join(rates)}")
    for name, said in digest.feedback.items():
        lines.append(f"• {_bold(name)}: {_reviewers(said)}")
    if digest.best_post is not None:
        lines.append(f"• Best post this week: {best_post_text(digest.best_post)}")
    lines += [f"• :warning: {escape_mrkdwn(warning)}" for warning in digest.warnings]
    return "\n".join(lines)


def best_post_text(post: PostStats) -> str:
    """`<url|weekly-update on bluesky:…>`, score 21 (10 likes, 3 reposts, 2 replies, 1 quote)."""
    name = f"{escape_mrkdwn(post.recipe)} on {escape_mrkdwn(post.target)}"
    shown = f"<{post.url}|{name}>" if post.url else name
    counts = (
        f"{post.likes} likes, {post.reposts} reposts, {post.replies} replies, {post.quotes} quotes"
    )
    return f"{shown}, score {post.score} ({counts})"


def _reviewers(said: RecipeFeedback) -> str:
    """`3 redrafts this month, most asked: 'shorter'` (people's words, escaped)."""
    parts = []
    if said.redrafts:
        parts.append(f"{said.redrafts} redraft{'' if said.redrafts == 1 else 's'} this month")
    if said.rejections:
        parts.append(f"{said.rejections} rejected{'' if said.redrafts else ' this month'}")
    line = ", ".join(parts)
    if said.most_asked:
        line += f", most asked: '{escape_mrkdwn(said.most_asked)}'"
    return line


def _bold(name: str) -> str:
    return f"*{escape_mrkdwn(name)}*"


def _code(run_id: str) -> str:
    return f"`{escape_mrkdwn(run_id)}`"
