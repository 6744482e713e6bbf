"""The image a source item brings, kept for the run that drafts from it (docs/design.md
§32): the item's own image (a feed's enclosure or media tag, a page's `og:image`), else,
for a feed item with a link, the linked page's `og:image`. Downloaded once, size-capped,
through the source reader's client and its time limits, shaped for the recipe's targets
and kept in the image library, all before the run's snapshot is stored (its caller holds
the claim, its heartbeat running, and no transaction). What it returns is the item with
the kept image's hash, or a one-line note saying why none was kept; an item without an
image, or whose page has none, is returned as it is. Every URL here is found, never
configured: each is checked by the guarded client (docs/design.md §33), and a refusal is
the note ("not fetched: the address is private"). Never calls the model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from urllib.parse import urlsplit

from core.errors import ImageRefused
from core.images.library import ImageLibrary
from core.policies import ImageSource
from core.sources.fetching import MAX_IMAGE_BYTES, get, source_client
from core.sources.items import ItemImage, ReadContext, SourceItem, SourceReadError
from core.sources.pages import page_image

IMAGE_ACCEPT = {"Accept": "image/avif, image/webp, image/png, image/jpeg, image/*;q=0.8"}
PAGE_ACCEPT = {"Accept": "text/html, application/xhtml+xml;q=0.9"}


def keep_item_image(
    item: SourceItem,
    library: ImageLibrary,
    targets: Sequence[str],
    context: ReadContext,
    *,
    own: ImageSource,
    follow_link: bool,
) -> SourceItem:
    """`item` with its image kept (`sha256`) or a note why not. `own` is what the item's
    own image is (a feed's enclosure, a page's og:image); `follow_link` reads the linked
    page's og:image for an item without one (a feed item's)."""
    image, source = item.image, own
    if image is None and follow_link and item.link:
        image = _linked_image(item.source, item.link, item.title, context)
        source = ImageSource.OG_IMAGE
    if image is None or image.sha256 is not None or image.note:
        return dataclasses.replace(item, image=image)
    return dataclasses.replace(
        item, image=_kept(item.source, image, source, library, targets, context)
    )


def _linked_image(source: str, link: str, title: str, context: ReadContext) -> ItemImage | None:
    """The linked page's og:image (captioned by its alt, else the page's or item's title);
    None when the page has none; a note when the page could not be read."""
    try:
        with source_client(context, PAGE_ACCEPT) as client:
            answer = get(client, source, link)
    except SourceReadError as failure:
        return ItemImage(
            link, title, note=f"the page at {shown(link)} could not be read: {failure.answer}"
        )
    if not answer.ok:
        return ItemImage(link, title, note=f"the page at {shown(link)} answered {answer.status}")
    found = page_image(answer)
    if found is None:
        return None
    return dataclasses.replace(found, caption=found.caption or title)


def _kept(
    source: str,
    image: ItemImage,
    kind: ImageSource,
    library: ImageLibrary,
    targets: Sequence[str],
    context: ReadContext,
) -> ItemImage:
    where = shown(image.url)
    try:
        with source_client(context, IMAGE_ACCEPT) as client:
            answer = get(client, source, image.url, limit=MAX_IMAGE_BYTES)
    except SourceReadError as failure:
        return dataclasses.replace(
            image, note=f"the image at {where} could not be read: {failure.answer}"
        )
    if not answer.ok:
        return dataclasses.replace(image, note=f"the image at {where} answered {answer.status}")
    try:
        taken = library.take(answer.body, image.name, kind, targets)
    except ImageRefused as refused:
        return dataclasses.replace(image, note=f"refused: the image at {where}: {refused}")
    return dataclasses.replace(image, sha256=taken.ref.sha256)


def shown(url: str) -> str:
    """The URL as a note shows it: scheme, host and path, never its query (it may be a
    signed, secret link)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
