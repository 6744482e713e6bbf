"""What approved text becomes on each platform, and how each platform measures it.

Model text is untrusted: it must never become a mention that notifies someone (docs/design.md
§13), so each platform gets it inert. Pure functions: nothing here sends anything.
"""

from __future__ import annotations

import html
import re
import unicodedata

WORD_JOINER = "\u2060"  # invisible, not a word character: `@\u2060ana` is no mention
URL_PATTERN = re.compile(r"https?://[^\s<>\"']+")
_URL_TRAILING = ".,;:!?)]}*_~"
# Mastodon's own mention pattern: `@user` or `@user@host` after start or a non-word, non-/
_MASTODON_MENTION = re.compile(r"(?:^|(?<=[^\w/]))@(?=\w)", re.MULTILINE)
# LinkedIn's "little text" format: these are markup in commentary unless escaped
LINKEDIN_RESERVED = frozenset("\\|{}@[]()<>#*_~")
_LINKEDIN_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_BREAK = re.compile(r"<br\s*/?>|</p>\s*<p[^>]*>", re.IGNORECASE)


def graphemes(text: str) -> int:
    """User-perceived characters (extended grapheme clusters, UAX #29), as Bluesky counts:
    an emoji family or a flag is one. The stdlib `re` has no `\\X`, hence `regex`."""
    import regex  # imported here: only fit checks need it

    return len(regex.findall(r"\X", text))


def urls(text: str) -> list[str]:
    """The links in `text` (http and https only), without trailing punctuation."""
    return [_trim_url(match.group()) for match in URL_PATTERN.finditer(text)]


def url_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each link in `text`."""
    spans = []
    for match in URL_PATTERN.finditer(text):
        spans.append((match.start(), match.start() + len(_trim_url(match.group()))))
    return spans


def _trim_url(url: str) -> str:
    while url and url[-1] in _URL_TRAILING:
        if url[-1] == ")" and url.count("(") >= url.count(")"):
            break  # a balanced parenthesis belongs to the link (Wikipedia-style URLs)
        url = url[:-1]
    return url


# --- Mastodon -----------------------------------------------------------------------------


def mastodon_text(text: str) -> str:
    """`@user` and `@user@host` made inert: a word joiner after the `@` (invisible)."""
    return _MASTODON_MENTION.sub("@" + WORD_JOINER, text)


def mastodon_length(text: str, url_length: int = 23) -> int:
    """Mastodon's count: graphemes, with every link counted as `url_length` characters."""
    spans = url_spans(text)
    counted, last = [], 0
    for start, end in spans:
        counted.append(text[last:start])
        counted.append("x" * url_length)
        last = end
    counted.append(text[last:])
    return graphemes("".join(counted))


def mastodon_content_text(content: str) -> str:
    """The plain text of a status's rendered HTML `content` (paragraphs and breaks as
    newlines; the hidden spans of a shortened link joined back into the link)."""
    return html.unescape(_TAG.sub("", _BREAK.sub("\n", content)))


# --- LinkedIn -----------------------------------------------------------------------------


def linkedin_commentary(text: str) -> str:
    """Text as LinkedIn commentary: every reserved character escaped with a backslash, so
    `@[Ana](urn:li:person:1)` is shown as written and mentions nobody."""
    return "".join("\\" + char if char in LINKEDIN_RESERVED else char for char in text)


def linkedin_plain(commentary: str) -> str:
    """Commentary read back as the text people see: escapes removed."""
    return _LINKEDIN_ESCAPE.sub(r"\1", commentary)


def linkedin_length(text: str) -> int:
    """Characters as LinkedIn's limit counts them: UTF-16 code units (an emoji is two),
    the cautious reading when a platform does not say."""
    return len(text.encode("utf-16-le")) // 2


# --- Discord ------------------------------------------------------------------------------


def discord_length(text: str) -> int:
    """Characters as Discord's 2,000 limit is read here: UTF-16 code units (an emoji is
    two), the cautious reading, since Discord does not say how it counts."""
    return len(text.encode("utf-16-le")) // 2


# --- Threads ------------------------------------------------------------------------------


def threads_text(text: str) -> str:
    """`@username` made inert as for Mastodon: a word joiner after the `@` (invisible), so
    Threads tags and notifies nobody."""
    return _MASTODON_MENTION.sub("@" + WORD_JOINER, text)


def threads_length(text: str) -> int:
    """Threads' count: characters, an emoji (and its joiners and selectors) counted as
    its UTF-8 bytes, as Threads' documentation says."""
    return sum(len(char.encode("utf-8")) if _emoji_like(char) else 1 for char in text)


def _emoji_like(char: str) -> bool:
    point = ord(char)
    if point > 0xFFFF or 0xFE00 <= point <= 0xFE0F:
        return True
    return point > 0x7F and unicodedata.category(char) in ("So", "Cf")


# --- Telegram -----------------------------------------------------------------------------


def telegram_text(text: str) -> str:
    """Text as a Telegram message with no `parse_mode` and no `entities`: no markup is
    read, no `text_mention` is made, and `@username` (which Telegram would link and, in a
    group, notify) is made inert by a word joiner after the `@`, as for Mastodon."""
    return _MASTODON_MENTION.sub("@" + WORD_JOINER, text)


def telegram_length(text: str) -> int:
    """Telegram's count: UTF-16 code units (an emoji outside the BMP is two), the unit its
    message entities and limits are measured in."""
    return len(text.encode("utf-16-le")) // 2


# --- matching a post read back against the text that was sent ------------------------------


def comparable(text: str) -> str:
    """Text reduced to what survives a platform's rendering: NFC, no word joiners, every
    run of whitespace one space, trimmed. Two posts of one text compare equal."""
    text = unicodedata.normalize("NFC", text).replace(WORD_JOINER, "")
    return " ".join(text.split())
