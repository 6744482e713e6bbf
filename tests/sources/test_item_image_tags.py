"""The image a feed entry or a page brings (docs/design.md §32), read from the document
alone: an image enclosure, else `media:content` that is an image, else `media:thumbnail`;
relative URLs resolved against the feed; a page's `og:image` with its `og:image:alt`.
Nothing is downloaded. Fast: documents parsed in-process, no server."""

from __future__ import annotations

import httpx

from core.egress.client import Fetched
from core.sources.feeds import _entry_item, parse_feed
from core.sources.items import ItemImage, SourceItem
from core.sources.pages import page_image

FEED_URL = "https://blog.example.com/feeds/rss.xml"
MEDIA = 'xmlns:media="http://search.yahoo.com/mrss/"'


def items_of(*entries: str) -> list[SourceItem]:
    document = (
        f'<?xml version="1.0"?><rss version="2.0" {MEDIA}><channel><title>Acme</title>'
        f"<link>https://blog.example.com/</link>{''.join(entries)}</channel></rss>"
    )
    answer = Fetched(
        FEED_URL,
        200,
        "OK",
        httpx.Headers({"content-type": "application/rss+xml"}),
        document.encode(),
    )
    parsed = parse_feed("blog", answer)
    return [_entry_item("blog", entry, answer.url) for entry in parsed.entries]


def entry(tags: str, title: str = "Widget 2.0") -> str:
    return (
        f"<item><title>{title}</title><link>https://blog.example.com/w2</link>"
        f"<guid>w2</guid><description>Out now.</description>{tags}</item>"
    )


def test_an_image_enclosure_is_the_items_image_captioned_by_its_title() -> None:
    [item] = items_of(
        entry(
            '<enclosure url="https://cdn.example.com/show.mp3" type="audio/mpeg" length="9"/>'
            '<enclosure url="https://cdn.example.com/w2.jpg" type="image/jpeg" length="9"/>'
        )
    )
    assert item.image == ItemImage("https://cdn.example.com/w2.jpg", "Widget 2.0")
    assert item.image.name == "w2.jpg"


def test_media_content_that_is_an_image_is_taken_and_a_video_is_not() -> None:
    [item] = items_of(
        entry(
            '<media:content url="https://cdn.example.com/clip.mp4" medium="video"/>'
            '<media:content url="https://cdn.example.com/w2.png" medium="image"/>'
        )
    )
    assert item.image is not None and item.image.url == "https://cdn.example.com/w2.png"
    [typed] = items_of(
        entry('<media:content url="https://cdn.example.com/w.webp" type="image/webp"/>')
    )
    assert typed.image is not None and typed.image.url == "https://cdn.example.com/w.webp"


def test_a_media_thumbnail_is_taken_when_nothing_better_is_there() -> None:
    [item] = items_of(entry('<media:thumbnail url="https://cdn.example.com/thumb.jpg"/>'))
    assert item.image == ItemImage("https://cdn.example.com/thumb.jpg", "Widget 2.0")


def test_an_enclosure_wins_over_a_thumbnail() -> None:
    [item] = items_of(
        entry(
            '<media:thumbnail url="https://cdn.example.com/thumb.jpg"/>'
            '<enclosure url="https://cdn.example.com/full.jpg" type="image/jpeg" length="9"/>'
        )
    )
    assert item.image is not None and item.image.url == "https://cdn.example.com/full.jpg"


def test_a_relative_image_url_is_resolved_against_the_feed() -> None:
    [item] = items_of(entry('<enclosure url="../img/w2.jpg" type="image/jpeg" length="9"/>'))
    assert item.image is not None and item.image.url == "https://blog.example.com/img/w2.jpg"


def test_an_entry_without_an_image_has_none_and_its_hash_is_unchanged() -> None:
    [plain] = items_of(entry(""))
    [audio] = items_of(
        entry('<enclosure url="https://cdn.example.com/a.mp3" type="audio/mpeg" length="9"/>')
    )
    [pictured] = items_of(
        entry('<enclosure url="https://cdn.example.com/w2.jpg" type="image/jpeg" length="9"/>')
    )
    assert plain.image is None and audio.image is None
    assert plain.content_hash == pictured.content_hash  # the image is not in the hash


def page(html: str, content_type: str = "text/html; charset=utf-8") -> Fetched:
    headers = httpx.Headers({"content-type": content_type})
    return Fetched("https://acme.example.com/news/launch", 200, "OK", headers, html.encode())


def test_a_pages_og_image_is_its_image_captioned_by_its_alt_else_its_title() -> None:
    head = (
        '<meta property="og:image" content="/img/launch.png">'
        '<meta property="og:image:alt" content="The team on stage">'
        '<meta property="og:title" content="Launch day">'
    )
    assert page_image(page(f"<html><head>{head}</head></html>")) == ItemImage(
        "https://acme.example.com/img/launch.png", "The team on stage"
    )
    untitled = '<meta property="og:image" content="https://cdn.example.com/a.jpg">'
    shown = page_image(page(f"<html><head><title>Launch</title>{untitled}</head></html>"))
    assert shown == ItemImage("https://cdn.example.com/a.jpg", "Launch")


def test_a_page_without_og_image_or_that_is_no_page_has_none() -> None:
    assert page_image(page("<html><head><title>Launch</title></head></html>")) is None
    assert page_image(page('<meta property="og:image" content="/a.jpg">', "text/plain")) is None
