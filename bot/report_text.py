"""The weekly report (core/api/report.py, docs/design.md §38) as Slack mrkdwn: a heading,
each recipe's sentences under its name in bold, and the week's best post linked; as
blocks, one section per recipe, so twenty recipes fit where one section would be cut."""

from __future__ import annotations

from typing import Any

from bot.block_kit import section
from bot.mrkdwn import SECTION_LIMIT, clip_mrkdwn, escape_mrkdwn
from core.api.report import Report, ReportRow

MAX_BLOCKS = 50  # Slack's limit for one message


def report_text(report: Report, week: str) -> str:
    return "\n".join(_parts(report, week))


def report_blocks(report: Report, week: str) -> list[dict[str, Any]]:
    parts = _parts(report, week)
    return [section(clip_mrkdwn(part, SECTION_LIMIT)) for part in parts][:MAX_BLOCKS]


def _parts(report: Report, week: str) -> list[str]:
    parts = [f"*Galley weekly report* · {week}"]
    parts += ["\n".join(_row_lines(row)) for row in report]
    post = report.best
    if post is not None and post.url:
        lift = f", lift {post.lift:.2f}x" if post.lift is not None else ""
        where = escape_mrkdwn(f"{post.recipe} on {post.target}")
        parts.append(f"• Best post this week: <{post.url}|{where}>{lift}")
    return parts


def _row_lines(row: ReportRow) -> list[str]:
    head, *figures = row.lines()
    return [f"*{escape_mrkdwn(head)}*", *(f"• {escape_mrkdwn(line)}" for line in figures)]
