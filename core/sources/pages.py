"""The `url` reader: one page's main text, by trafilatura (docs/design.md §26).

One item: the configured URL is its id and its link, the page's main text (navigation,
footers and scripts left out) its text, so its content hash changes when the page is
edited. The page says no date the window could trust: the item is undated. Its image is
its `og:image` (docs/design.md §32), captioned by `og:image:alt`, else its title; noted,
never downloaded here.
"""

from __future__ import annotations

from core.egress.client import Fetched
from core.sources.fetching import fetch, source_client
from core.sources.items import ItemImage, ReadContext, SourceItem, SourceReadError
from core.sources.open_graph import page_tags
from core.sources.plain_text import html_to_text
from core.sources.source_secrets import source_secret
from core.sources.specs import UrlSource

_HTML_TYPES = ("text/html", "application/xhtml+xml")


def read_page(spec: UrlSource, context: ReadContext) -> list[SourceItem]:
    accept = {"Accept": "text/html, text/plain;q=0.8"}
    with source_client(context, accept, source_secret(spec)) as client:
        answer = fetch(client, spec.label, spec.url, configured=True)
    title, text = page_text(spec.label, answer)
    image = page_image(answer)
    return [
        SourceItem(
            source=spec.label,
            item_id=spec.url,
            title=title or spec.url,
            link=spec.url,
            published_at=None,
            text=text,
            image=image,
        )
    ]


def page_image(answer: Fetched) -> ItemImage | None:
    """The page's `og:image`, resolved against where the page came from; None for a page
    without one, or an answer that is no HTML page."""
    media_type = answer.headers.get("content-type", "text/html").split(";")[0].strip().lower()
    if media_type not in _HTML_TYPES:
        return None
    tags = page_tags(answer.body.decode(_charset(answer) or "utf-8", "replace"))
    url = tags.image_url(answer.url)
    return ItemImage(url, tags.image_caption()) if url else None


def page_text(source: str, answer: Fetched) -> tuple[str, str]:
    """(title, main text) of an HTML or plain-text page; SourceReadError for any other."""
    media_type = answer.headers.get("content-type", "text/html").split(";")[0].strip().lower()
    if media_type == "text/plain":
        return "", answer.body.decode(_charset(answer) or "utf-8", "replace").strip()
    if media_type not in _HTML_TYPES:
        raise SourceReadError(
            source, f"{answer.where} is {media_type}, not a web page", retryable=False
        )
    import trafilatura  # 1.5 s to import: paid only by a recipe that reads a page

    document = trafilatura.bare_extraction(answer.body, url=answer.url, with_metadata=True)
    title = str(getattr(document, "title", None) or "")
    text = str(getattr(document, "text", None) or "")
    if not text:  # too little for an article: the page's whole text rather than nothing
        text = html_to_text(answer.body.decode(_charset(answer) or "utf-8", "replace"))
    return title, text


def _charset(answer: Fetched) -> str | None:
    for part in answer.headers.get("content-type", "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            return str(value).strip('"')
    return None
