"""A Slack message's text as people read it: `<@U123>` as the person's name, channels
and links as their labels, `&amp;` decoded. Never leaves Slack's angle-bracket syntax in
place, so nothing a source says can become a mention when a draft is posted.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

# <@U123>, <@U123|ana>, <#C123|general>, <!here>, <!subteam^S1|@eng>, <https://x|label>
_ANGLE = re.compile(r"<([^<>\s|]+)(?:\|([^<>]*))?>")


def readable_text(text: str, name_of: Callable[[str], str]) -> str:
    """`text` with every `<...>` token rendered; `name_of` maps a user id to a name."""

    def render(match: re.Match[str]) -> str:
        target, label = match.group(1), match.group(2)
        return _render(target, label, name_of)

    # Rendered again once decoded: `&lt;!here&gt;` someone typed is `<!here>` after it.
    return _ANGLE.sub(render, html.unescape(_ANGLE.sub(render, text)))


def _render(target: str, label: str | None, name_of: Callable[[str], str]) -> str:
    if target.startswith("@"):
        return f"@{name_of(target[1:])}"
    if target.startswith("#"):
        return f"#{label or target[1:]}"
    if target.startswith("!"):
        return _special(target[1:], label)
    return f"{label} ({target})" if label and label != target else target


def _special(command: str, label: str | None) -> str:
    """`<!here>`, `<!channel>`, `<!everyone>` as plain words (no longer a ping); a user
    group or a date as its label."""
    word = command.split("^", 1)[0]
    if word in ("here", "channel", "everyone"):
        return f"@{word}"
    return (label or word).lstrip("@")
