"""Link cards (docs/design.md §32): a Bluesky post with a link and no image gets an
external embed, its title, description and thumbnail read from the linked page's
OpenGraph tags when the post is sent. The thumbnail is an image like any other: shaped,
kept by hash and uploaded once per draft and target (`core/images/uploads.py`). A page
that cannot be read gives no card, and the publication's receipt says why.

The link and its thumbnail are found URLs (docs/design.md §33): both go through the
guarded client, each read capped (PAGE_BYTES, IMAGE_LIMIT) and done within CARD_DEADLINE
at most, since the post waits on it inside its fenced send (the receipt's lease is kept
alive by heartbeat meanwhile). It reads pages; it never posts.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from datetime import timedelta

import httpx

from core.egress.client import PAGE_BYTES, Fetched
from core.egress.way_out import Egress
from core.errors import ImageRefused, NotFetched
from core.images.library import ImageLibrary
from core.images.uploads import ImageUploads
from core.policies import ImageSource
from core.ports import ImageUploader, LinkCard, Publication
from core.publishing.platforms.post_text import url_spans
from core.sources.open_graph import page_tags
from core.store.receipts import Proof

IMAGE_LIMIT = 10_000_000  # bytes of an og:image downloaded
CARD_DEADLINE = 10.0  # seconds, at most, for the page (redirects included), and again for its image
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
    egress: Egress,
) -> LinkCard | None:
    """The card of the post's first link with its thumbnail uploaded once; None for a
    post with no link; a card that says why it is `missing` for a page not read."""
    link = first_link(publication.text)
    if link is None:
        return None
    page = read_card(link, egress, min(CARD_DEADLINE, call_timeout.total_seconds()))
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


def read_card(url: str, egress: Egress, deadline: float = CARD_DEADLINE) -> PageCard | str:
    """The page's card, or why there is none (in words, for the receipt): the page and
    its image each read within `deadline` seconds in all (the post waits on them)."""
    page = _read(url, egress, deadline, PAGE_BYTES)
    if isinstance(page, str):
        return page
    if page.status != 200:
        return f"the page answered {page.status}"
    if "html" not in page.headers.get("content-type", ""):
        return "the link is not a web page"
    tags = page_tags(page.body.decode(_charset(page), "replace"))
    title = (tags.meta.get("og:title") or tags.title).strip()[:TITLE_LIMIT]
    if not title:
        return "the page has no title"
    description = (tags.meta.get("og:description") or tags.meta.get("description") or "").strip()
    image, name = _image(tags.image_url(page.url), egress, deadline)
    return PageCard(url, title, description[:DESCRIPTION_LIMIT], image, name)


def _read(url: str, egress: Egress, deadline: float, limit: int) -> Fetched | str:
    """The answer at a found URL, or why there is none, in words."""
    try:
        with egress.client(deadline) as client:
            return client.get(url, limit=limit, deadline=deadline)
    except NotFetched as refused:
        return str(refused)
    except httpx.HTTPError as exc:
        return f"the page could not be read ({type(exc).__name__})"


def _image(url: str | None, egress: Egress, deadline: float) -> tuple[bytes | None, str]:
    """The og:image's bytes, or none (a card without a thumbnail is still a card)."""
    if not url:
        return None, ""
    answer = _read(url, egress, deadline, IMAGE_LIMIT)
    if isinstance(answer, str) or answer.status != 200:
        return None, ""
    return answer.body, url.rsplit("/", 1)[-1] or "og-image"


def _charset(page: Fetched) -> str:
    """The page's charset as its Content-Type names it, if Python knows it; else UTF-8."""
    named = httpx.Response(page.status, headers=page.headers).charset_encoding
    try:
        return codecs.lookup(named or "utf-8").name
    except LookupError:
        return "utf-8"
