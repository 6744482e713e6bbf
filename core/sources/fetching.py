"""One GET of a source's server, classified as a model call's failure is (docs/design.md
§8, §14): timeouts, 5xx, 429 and 304 may help to ask again; 401/403/404 and other 4xx
never do. Never retries or sleeps itself: the run's attempt policy decides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from ssl import SSLContext
from typing import Any
from urllib.parse import urlsplit

import httpx

from core.http_calls import call_timeout
from core.sources.items import ReadContext, SourceReadError
from core.sources.source_secrets import SourceSecret

MAX_ANSWER_BYTES = 5_000_000  # a feed or page larger than this is not news, it is a mistake
MAX_IMAGE_BYTES = 25_000_000  # an item's image before shaping: a camera's JPEG, not a video
USER_AGENT = "Galley (source reader)"
_ANSWER_EXCERPT = 200


@dataclass(frozen=True)
class Answer:
    """An answer, read whole: `url` is where it came from after redirects, `next_url`
    the `Link: rel="next"` page after it (None on the last page)."""

    url: str
    status: int
    reason: str
    headers: httpx.Headers
    body: bytes
    next_url: str | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def where(self) -> str:
        return shown_url(self.url)

    def json(self) -> Any:
        return json.loads(self.body)


def source_client(
    context: ReadContext,
    headers: Mapping[str, str] | None = None,
    secret: SourceSecret | None = None,
) -> httpx.Client:
    """A client for one source's read: its timeout, redirects followed, our user agent,
    and the source's `secret` header on each request to the configured origin only."""
    limits = call_timeout(timedelta(seconds=context.timeout))
    return httpx.Client(
        timeout=httpx.Timeout(limits.phase, connect=limits.connect),
        verify=_tls_context(),
        follow_redirects=True,
        headers={"User-Agent": USER_AGENT, **(headers or {})},
        event_hooks={"request": [secret.attach] if secret else []},
    )


@cache
def _tls_context() -> SSLContext:
    """httpx's own (SSL_CERT_FILE honoured), made once per process: loading the CA
    bundle takes ~75 ms, which every source read would otherwise pay."""
    return httpx.create_ssl_context()


def fetch(
    client: httpx.Client,
    source: str,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> Answer:
    """GET `url`; its answer when 2xx, else SourceReadError naming `source`, the status
    and what the server said."""
    answer = get(client, source, url, params=params, limit=limit)
    if not answer.ok:
        raise status_error(source, answer)
    return answer


def get(
    client: httpx.Client,
    source: str,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> Answer:
    """GET `url`: its answer whatever its status (the body at most `limit` bytes,
    MAX_ANSWER_BYTES unless told, else a SourceReadError that is not retryable), or a
    retryable SourceReadError when no answer came."""
    where = shown_url(url)
    try:
        with client.stream("GET", url, params=params) as response:
            body = _read_capped(response, source, where, limit or MAX_ANSWER_BYTES)
    except httpx.TimeoutException as exc:
        raise SourceReadError(
            source, f"no answer from {where} in time ({type(exc).__name__})", retryable=True
        ) from exc
    except httpx.HTTPError as exc:
        raise SourceReadError(source, f"cannot reach {where}: {exc}", retryable=True) from exc
    next_link = response.links.get("next", {}).get("url")
    return Answer(
        url=str(response.url),
        status=response.status_code,
        reason=response.reason_phrase,
        headers=response.headers,
        body=body,
        next_url=str(response.url.join(next_link)) if next_link else None,
    )


def status_error(source: str, answer: Answer, *, retryable: bool | None = None) -> SourceReadError:
    """The failure a non-2xx answer is: retryable as its status says, unless told."""
    if retryable is None:
        retryable = retryable_status(answer.status)
    return SourceReadError(source, status_answer(answer), retryable=retryable)


def retryable_status(code: int) -> bool:
    """304 (nothing sent this time), 408, 425, 429 and 5xx may pass; other 4xx never do."""
    return code in (304, 408, 425, 429) or code >= 500


def status_answer(answer: Answer) -> str:
    """One line: `HTTP 404 Not Found from host/path: what it said`."""
    said = " ".join(answer.body[:_ANSWER_EXCERPT].decode("utf-8", "replace").split())
    line = f"HTTP {answer.status} {answer.reason} from {shown_url(answer.url)}".rstrip()
    return f"{line}: {said}" if said else line


def _read_capped(response: httpx.Response, source: str, where: str, limit: int) -> bytes:
    chunks = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise SourceReadError(
                source,
                f"the answer from {where} is over {limit:,} bytes",
                retryable=False,
            )
        chunks.append(chunk)
    return b"".join(chunks)


def shown_url(url: str) -> str:
    """Host, port and path: never the query or a `user:password@`, which may be secret."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.hostname or ''}{port}{parts.path}"
