"""The `github` reader: a repository's releases and merged pull requests, by the REST
API (docs/design.md §26). Pages by `Link: rel="next"` and stops once a page reaches
items older than the window; never writes to GitHub, never sends the token elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from core.egress.client import Fetched
from core.policies import GithubItems
from core.sources.fetching import (
    SourceClient,
    get,
    shown_url,
    source_client,
    status_error,
)
from core.sources.items import ReadContext, SourceItem, SourceReadError, Window
from core.sources.specs import GithubSource

PER_PAGE = "100"  # GitHub's largest page
MAX_PAGES = 10  # a first slot (no window start) reads at most the newest 1,000 of each
API_VERSION = "2022-11-28"


def read_github(spec: GithubSource, window: Window, context: ReadContext) -> list[SourceItem]:
    """The releases and pull requests merged in `window`, as the spec's `items` ask."""
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION}
    if context.github_token:
        headers["Authorization"] = f"Bearer {context.github_token}"
    items: list[SourceItem] = []
    with source_client(context, headers) as client:
        if GithubItems.RELEASES in spec.items:
            items += _releases(client, spec, window)
        if GithubItems.MERGED_PULLS in spec.items:
            items += _merged_pulls(client, spec, window)
    return items


def _releases(client: SourceClient, spec: GithubSource, window: Window) -> list[SourceItem]:
    url = f"{spec.api.rstrip('/')}/repos/{spec.repo}/releases"
    items = []
    # Newest created first: a page whose last release was created before the window
    # ends the walk (a release is published after it is created, never before).
    for release in _pages(client, spec, url, {}, window, "created_at"):
        published = _moment(release.get("published_at"))
        if release.get("draft") or published is None:
            continue  # a draft is no news yet (and only a token that can push sees it)
        items.append(
            SourceItem(
                source=spec.label,
                item_id=f"release:{release['id']}",
                title=release.get("name") or release.get("tag_name") or "",
                link=release.get("html_url"),
                published_at=published,
                text=release.get("body") or "",
            )
        )
    return items


def _merged_pulls(client: SourceClient, spec: GithubSource, window: Window) -> list[SourceItem]:
    url = f"{spec.api.rstrip('/')}/repos/{spec.repo}/pulls"
    params = {"state": "closed", "sort": "updated", "direction": "desc"}
    items = []
    # Newest updated first: a pull request merged in the window was updated in it too.
    for pull in _pages(client, spec, url, params, window, "updated_at"):
        merged = _moment(pull.get("merged_at"))
        if merged is None:
            continue  # closed without being merged
        items.append(
            SourceItem(
                source=spec.label,
                item_id=f"pull:{pull['number']}",
                title=pull.get("title") or "",
                link=pull.get("html_url"),
                published_at=merged,
                text=pull.get("body") or "",
            )
        )
    return items


def _pages(
    client: SourceClient,
    spec: GithubSource,
    url: str,
    params: dict[str, str],
    window: Window,
    order_key: str,
) -> Iterator[dict[str, Any]]:
    """Every entry of every page, until a page ends before the window, or (a first slot,
    no window start) once `max_items` entries are read, or after MAX_PAGES."""
    next_url: str | None = url
    query: dict[str, str] | None = {**params, "per_page": PER_PAGE}
    read = 0
    for _ in range(MAX_PAGES):
        if next_url is None:
            return
        answer = _get_page(client, spec.label, next_url, query)
        entries = _entries(spec.label, answer)
        yield from entries
        read += len(entries)
        if entries and _before(window, _moment(entries[-1].get(order_key))):
            return
        if window.start is None and read >= spec.max_items:
            return  # newest first: the rest would be cut by max_items anyway
        next_url, query = _next_page(spec, answer), None  # the next link carries the query


def _next_page(spec: GithubSource, answer: Fetched) -> str | None:
    """The next page's URL; never one on another server, which would be sent the token."""
    if answer.next_url is None:
        return None
    if urlsplit(answer.next_url)[:2] != urlsplit(spec.api)[:2]:
        raise SourceReadError(
            spec.label,
            f"the next page is on another server: {shown_url(answer.next_url)}",
            retryable=False,
        )
    return answer.next_url


def _get_page(
    client: SourceClient, source: str, url: str, params: dict[str, str] | None
) -> Fetched:
    # the configured API's own pages (never another server's, see _next_page) are as
    # trusted as the `api` the operator wrote
    answer = get(client, source, url, params=params, configured=True)
    if answer.ok:
        return answer
    if answer.status in (403, 429) and answer.headers.get("x-ratelimit-remaining") == "0":
        raise SourceReadError(source, _rate_limited(answer), retryable=True)
    if answer.status == 403 and "retry-after" in answer.headers:  # a secondary rate limit
        raise status_error(source, answer, retryable=True)
    raise status_error(source, answer)


def _rate_limited(answer: Fetched) -> str:
    resets = answer.headers.get("x-ratelimit-reset", "")
    when = _epoch(resets)
    at = f"; it resets at {when.isoformat()}" if when else ""
    return f"GitHub rate limit reached (HTTP {answer.status}){at}"


def _entries(source: str, answer: Fetched) -> list[dict[str, Any]]:
    try:
        entries = answer.json()
    except ValueError as exc:
        raise SourceReadError(
            source, f"{answer.where} answered no JSON: {exc}", retryable=False
        ) from exc
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise SourceReadError(
            source, f"{answer.where} answered no list of entries", retryable=False
        )
    return entries


def _before(window: Window, moment: datetime | None) -> bool:
    return window.start is not None and moment is not None and moment <= window.start


def _moment(value: object) -> datetime | None:
    """GitHub's `2026-03-08T12:00:00Z` as an aware datetime; None for null."""
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value).astimezone(UTC)


def _epoch(value: str) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(value), tz=UTC)
    except ValueError:
        return None
