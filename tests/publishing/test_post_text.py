"""Model text made inert per platform and measured as each platform counts (docs/design.md
§13 and §24): pure functions, no network."""

from __future__ import annotations

import pytest

from core.publishing.platforms.post_text import (
    WORD_JOINER,
    comparable,
    graphemes,
    linkedin_commentary,
    linkedin_length,
    linkedin_plain,
    mastodon_content_text,
    mastodon_length,
    mastodon_text,
    urls,
)


@pytest.mark.parametrize(
    ("text", "count"),
    [("hello", 5), ("e\u0301", 1), ("👨\u200d👩\u200d👧", 1), ("🇬🇧🇫🇷", 2), ("a\r\nb", 3)],
)
def test_graphemes_count_what_a_reader_sees(text: str, count: int) -> None:
    assert graphemes(text) == count


def test_links_end_before_trailing_punctuation_but_keep_balanced_parentheses() -> None:
    text = "See https://example.com/a. And (https://en.wikipedia.org/wiki/Foo_(bar)), ok?"
    assert urls(text) == ["https://example.com/a", "https://en.wikipedia.org/wiki/Foo_(bar)"]


def test_mastodon_counts_each_link_as_23() -> None:
    link = "https://example.com/" + "x" * 100
    assert mastodon_length(f"Read {link} now") == len("Read ") + 23 + len(" now")
    assert mastodon_length(link, url_length=30) == 30


@pytest.mark.parametrize(
    ("text", "inert"),
    [
        ("@ana hi", f"@{WORD_JOINER}ana hi"),
        ("hi @bob@mastodon.social!", f"hi @{WORD_JOINER}bob@mastodon.social!"),
        ("line\n@carol", f"line\n@{WORD_JOINER}carol"),
        ("mail team@acme.test", "mail team@acme.test"),  # an address is no mention
        ("https://x.test/@dan", "https://x.test/@dan"),  # nor a profile link's path
        ("a lone @ sign", "a lone @ sign"),
    ],
)
def test_mastodon_mentions_get_a_word_joiner_and_nothing_else_changes(
    text: str, inert: str
) -> None:
    assert mastodon_text(text) == inert
    assert comparable(mastodon_text(text)) == comparable(text)


def test_mastodon_content_reads_back_as_the_text_sent() -> None:
    content = (
        '<p>Hello &amp; welcome<br />to <a href="https://example.com/long/path">'
        '<span class="invisible">https://</span><span class="ellipsis">example.com/lo</span>'
        '<span class="invisible">ng/path</span></a></p><p>Bye</p>'
    )
    assert comparable(mastodon_content_text(content)) == comparable(
        "Hello & welcome\nto https://example.com/long/path\n\nBye"
    )


def test_linkedin_commentary_escapes_every_reserved_character_and_reads_back() -> None:
    text = r"Hi @[Ana](urn:li:person:1) #tag *b* _i_ ~s~ {x} | <y> \ end"
    commentary = linkedin_commentary(text)
    assert "@[" not in commentary and "](" not in commentary
    assert commentary.startswith(r"Hi \@\[Ana\]\(urn:li:person:1\)")
    assert linkedin_plain(commentary) == text


def test_linkedin_counts_utf16_units() -> None:
    assert linkedin_length("abc") == 3 and linkedin_length("🎉") == 2
