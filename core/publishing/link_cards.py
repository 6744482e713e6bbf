"""Link cards (docs/design.md §32): a Bluesky post with a link and no image gets an
external embed, its title, description and thumbnail read from the linked page's
OpenGraph tags when the post is sent. The thumbnail is an image like any other: shaped,
kept by hash and uploaded once per draft and target (`core/images/uploads.py`). A page
that cannot be read gives no card, and the publication's receipt says why.

It reads pages; it never posts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import httpx

from core.errors import ImageRefused
from core.images.library import ImageLibrary
from core.images.uploads import ImageUploads
from core.policies import ImageSource
from core.ports import ImageUploader, LinkCard, Publication
from core.publishing.platforms.post_text import url_spans
from core.sources.open_graph import page_tags
from core.store.receipts import Proof

IMAGE_LIMIT = 10_000_000  # bytes of an og:image downloaded
READ_TIMEOUT = 10.0  # seconds per request
TITLE_LIMIT = 300
DESCRIPTION_LIMIT = 1000


@dataclass(frozen=True)
class PageCard:
    """What a page says of itself: its URL, title, description and image (bytes)."""

    url: str
    title: str
    description: str
    image: bytes | None = None
    image_name: str = ""


def card_for(
    publication: Publication,
    uploader: ImageUploader,
    target: str,
    library: ImageLibrary,
    uploads: ImageUploads,
    *,
    run_id: str,
    call_timeout: timedelta,
) -> LinkCard | None:
    """The card of the post's first link with its thumbnail uploaded once; None for a
    post with no link; a card that says why it is `missing` for a page not read."""
    link = first_link(publication.text)
    if link is None:
        return None
    page = read_card(link, call_timeout.total_seconds())
    if isinstance(page, str):
        return LinkCard(link, missing=page)
    thumb = None
    if page.image is not None:
        try:
            taken = library.take(page.image, page.image_name, ImageSource.OG_IMAGE, [target])
        except ImageRefused:
            taken = None  # a card without a thumbnail is still a card
        if taken is not None:
            [thumb] = uploads.upload_all(
                uploader,
                target,
                publication.draft_key,
                [taken.ref],
                run_id=run_id,
                call_timeout=call_timeout,
            )
    return LinkCard(link, page.title, page.description, thumb)


def with_card_note(proof: Proof, card: LinkCard | None) -> Proof:
    """The publication's proof, saying on its receipt whether the post went with a card
    and, when a page could not be read, why not."""
    if card is None:
        return proof
    note = f"none: {card.missing}" if card.missing else "external"
    return Proof(proof.external_id, {**(proof.result or {}), "card": note})


def first_link(text: str) -> str | None:
    """The post's first link, as the platform makes it clickable."""
    spans = url_spans(text)
    return text[spans[0][0] : spans[0][1]] if spans else None


def read_card(url: str, timeout: float = READ_TIMEOUT) -> PageCard | str:
    """The page's card, or why there is none (in words, for the receipt); each request
    within `timeout` seconds (the recipe's call limit: the post waits on it)."""
    try:
        page = httpx.get(url, follow_redirects=True, timeout=timeout)
    except httpx.HTTPError as exc:
        return f"the page could not be read ({type(exc).__name__})"
    if page.status_code != 200:
        return f"the page answered {page.status_code}"
    if "html" not in page.headers.get("content-type", ""):
        return "the link is not a web page"
    tags = page_tags(page.text)
    title = (tags.meta.get("og:title") or tags.title).strip()[:TITLE_LIMIT]
    if not title:
        return "the page has no title"
    description = (tags.meta.get("og:description") or tags.meta.get("description") or "").strip()
    image, name = _image(tags.image_url(str(page.url)), timeout)
    return PageCard(url, title, description[:DESCRIPTION_LIMIT], image, name)


def _image(url: str | None, timeout: float) -> tuple[bytes | None, str]:
    """The og:image's bytes, or none (a card without a thumbnail is still a card)."""
    if not url:
        return None, ""
    try:
        answer = httpx.get(url, follow_redirects=True, timeout=timeout)
    except httpx.HTTPError:
        return None, ""
    if answer.status_code != 200 or len(answer.content) > IMAGE_LIMIT:
        return None, ""
    return answer.content, url.rsplit("/", 1)[-1] or "og-image"
