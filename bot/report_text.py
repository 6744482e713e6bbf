"""The weekly report (core/api/report.py, docs/design.md §36) as Slack mrkdwn: a heading,
each recipe's sentences under its name in bold, and the week's best post linked."""

from __future__ import annotations

from bot.mrkdwn import escape_mrkdwn
from core.api.report import Report, ReportRow


def report_text(report: Report, week: str) -> str:
    lines = [f"*Galley weekly report* · {week}"]
    for row in report:
        lines += _row_lines(row)
    post = report.best
    if post is not None and post.url:
        lift = f", lift {post.lift:.2f}x" if post.lift is not None else ""
        where = escape_mrkdwn(f"{post.recipe} on {post.target}")
        lines.append(f"• Best post this week: <{post.url}|{where}>{lift}")
    return "\n".join(lines)


def _row_lines(row: ReportRow) -> list[str]:
    head, *figures = row.lines()
    return [f"*{escape_mrkdwn(head)}*", *(f"• {escape_mrkdwn(line)}" for line in figures)]
