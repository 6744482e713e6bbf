"""Mrkdwn made inert and cut to fit: Slack never sees a mention, link or entity that came
from untrusted text, and no cut ever falls inside `&amp;` or `<…>`. Pure functions.

Two halves of one rule: outside text is escaped (`escape_mrkdwn`, so no `<!here>` or
`<@U…>` survives), and every mrkdwn text object Galley sends is `verbatim`
(`mrkdwn_object`, so Slack does not turn a bare @channel, #channel or URL into one)."""

from __future__ import annotations

from typing import Any

SECTION_LIMIT = 3000  # characters of text in one section block
ENTITY_MAX = len("&amp;")


def mrkdwn_object(mrkdwn: str) -> dict[str, Any]:
    """A Block Kit mrkdwn text object. Always `verbatim`: Slack then acts only on the
    `<…>` forms Galley writes itself (`<@U…>`, `<!date^…>`, `<url|text>`)."""
    return {"type": "mrkdwn", "text": mrkdwn, "verbatim": True}


def escape_mrkdwn(text: str) -> str:
    """Make text inert in mrkdwn: `&` first, so the entities added for `<` `>` survive."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def inert(text: str, limit: int) -> str:
    """Untrusted text escaped and clipped to `limit` characters (with "…" when cut)."""
    return clip_mrkdwn(escape_mrkdwn(text), limit)


def clip_mrkdwn(mrkdwn: str, limit: int) -> str:
    """Mrkdwn clipped to `limit` characters with "…", never inside `&…;` or `<…>`."""
    if len(mrkdwn) <= limit:
        return mrkdwn
    return mrkdwn[: safe_cut(mrkdwn, limit - 1)] + "…"


def split_for_sections(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Escape `text` and cut it into chunks of at most `limit` characters.

    A cut goes at the last paragraph break ("\\n\\n") in the second half of the window,
    else the last line break, else the last space, and that one separator is dropped.
    With none of them, it is a hard cut that drops nothing and moves back before an
    entity (`&amp;`, `&lt;`, `&gt;`) rather than split it. So the escaped text is
    `chunk0 + sep0 + chunk1 + sep1 + …` with each sep one of "\\n\\n", "\\n", " ", "".
    Every chunk is non-empty; empty text gives `[" "]` because Slack rejects empty text.
    """
    escaped = escape_mrkdwn(text)
    if not escaped:
        return [" "]
    return [escaped[start:end] for start, end in section_spans(escaped, limit)]


def section_spans(escaped: str, limit: int) -> list[tuple[int, int]]:
    """(start, end) of each chunk of non-empty escaped text; see `split_for_sections`."""
    if limit < ENTITY_MAX:
        raise ValueError(f"limit must be at least {ENTITY_MAX}, got {limit}")
    spans: list[tuple[int, int]] = []
    start = 0
    while len(escaped) - start > limit:
        # Only the second half of the window: an early break would waste a block. The
        # separator must end before the text does, so the next chunk is never empty.
        floor, hard = start + max(1, limit // 2), start + limit
        for separator in ("\n\n", "\n", " "):
            end = escaped.rfind(separator, floor, min(hard + len(separator), len(escaped) - 1))
            if end != -1:
                spans.append((start, end))
                start = end + len(separator)
                break
        else:
            end = hard_cut(escaped, start, limit)
            spans.append((start, end))
            start = end
    spans.append((start, len(escaped)))
    return spans


def hard_cut(escaped: str, start: int, limit: int) -> int:
    """`start + limit`, or earlier so as not to split an entity (every `&` starts one)."""
    hard = start + limit
    amp = escaped.rfind("&", max(start + 1, hard - ENTITY_MAX + 1), hard)
    if amp != -1 and escaped.find(";", amp) + 1 > hard:
        return amp
    return hard


def safe_cut(mrkdwn: str, limit: int) -> int:
    """`limit`, or earlier so the cut splits no entity and no `<…>` link or mention."""
    cut = hard_cut(mrkdwn, 0, limit)
    opening = mrkdwn.rfind("<", 0, cut)
    if opening != -1 and mrkdwn.rfind(">", opening, cut) == -1:
        cut = opening
    return cut


def unescape(escaped: str) -> str:
    return escaped.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
