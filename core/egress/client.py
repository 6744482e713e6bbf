"""The one guarded client for every URL Galley fetches (docs/design.md §33): sources'
servers, items' images and pages, link cards' pages and thumbnails.

A configured URL (the operator wrote it) is trusted for its first request only; every
found URL and every redirect hop is checked: `http`/`https`, no `user:password@`, and
(in the network backend) only addresses that are global or `[egress] allow`ed. Each read
is bounded in bytes on the wire, bytes decoded and total time, redirects included.
Redirects are followed here, by hand, at most MAX_REDIRECTS. Never retries.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from ssl import SSLContext
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

import httpcore
import httpx

from core.egress.addresses import EgressAllow
from core.egress.backend import (
    Deadline,
    Dialer,
    GuardedBackend,
    RequestHook,
    Resolver,
    system_dialer,
    system_resolver,
)
from core.egress.bodies import ACCEPT_ENCODING, read_bounded
from core.errors import NotFetched
from core.http_calls import call_timeout
from core.policies import FetchStop

MAX_REDIRECTS = 5
PAGE_BYTES = 5_000_000  # a feed or page larger than this is not news, it is a mistake
IMAGE_BYTES = 25_000_000  # an item's image before shaping: a camera's JPEG, not a video
_SECRET_HEADERS = ("authorization", "cookie")  # never carried to another origin


@dataclass(frozen=True)
class Fetched:
    """An answer read whole under its bounds: `url` is where it came from after
    redirects, `next_url` its `Link: rel="next"` page (None if it names none)."""

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


class Closing(ABC):
    """A client used in a `with` block, closed on leaving it: a subclass says how it
    closes."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None:
        """Release what the client holds (its connections)."""


class EgressClient(Closing):
    """One reader's way out. `timeout` bounds each socket wait (the recipe's
    `call_timeout`); each `get` is bounded as a whole by its `deadline`."""

    def __init__(
        self,
        allow: EgressAllow,
        *,
        timeout: float,
        resolver: Resolver = system_resolver,
        dialer: Dialer = system_dialer,
        on_request: Sequence[RequestHook] = (),
    ) -> None:
        self._deadline = Deadline()
        limits = call_timeout(timedelta(seconds=timeout))
        waits = httpx.Timeout(limits.phase, connect=limits.connect)

        def client(rules: EgressAllow | None) -> httpx.Client:
            backend = GuardedBackend(rules, self._deadline, resolver=resolver, dialer=dialer)
            transport = _GuardedTransport(backend, _tls_context())
            return httpx.Client(
                transport=transport,
                timeout=waits,
                trust_env=False,
                event_hooks={"request": list(on_request)},
            )

        # two pools, so a connection opened for a trusted URL never carries a found one
        self._configured = client(None)
        self._found = client(allow)

    def close(self) -> None:
        self._configured.close()
        self._found.close()

    def get(
        self,
        url: str,
        *,
        limit: int,
        deadline: float,
        configured: bool = False,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        follow_redirects: bool = True,
    ) -> Fetched:
        """GET `url` and its redirects within `deadline` seconds in all, the body at most
        `limit` bytes; the answer whatever its status. NotFetched for a refused URL or
        address, a bound passed, too many redirects, or any redirect at all when not
        `follow_redirects` (then nothing is sent on: its headers go nowhere else); httpx's
        errors when no answer came (a refused connection, a timeout before the deadline)."""
        self._deadline.start(deadline)
        try:
            current = httpx.URL(url).copy_merge_params(params or {})
        except httpx.InvalidURL as exc:
            raise NotFetched(f"{shown_url(url)} is not a valid URL: {exc}") from exc
        sent = _request_headers(headers)
        where = shown_url(str(current))
        try:
            for hop in range(MAX_REDIRECTS + 1):
                trusted = configured and hop == 0
                if not trusted:
                    check_found_url(where, current)
                client = self._configured if trusted else self._found
                answer = self._one(client, current, sent, limit)
                if isinstance(answer, Fetched):
                    return answer
                if not follow_redirects:
                    raise NotFetched(
                        f"{where} answered with a redirect: not followed", stop=FetchStop.REDIRECT
                    )
                sent = _hop_headers(sent, current, answer)
                current, where = answer, shown_url(str(answer))
        except httpx.InvalidURL as exc:  # a redirect's Location that is no URL
            raise NotFetched(f"{where} redirects to no valid URL: {exc}") from exc
        except httpx.TimeoutException as exc:
            if self._deadline.left() > 0:
                raise
            raise NotFetched(
                f"no whole answer from {where} in time (the deadline is {deadline:g}s)",
                retryable=True,
                stop=FetchStop.DEADLINE,
            ) from exc
        raise NotFetched(f"{shown_url(url)} redirects more than {MAX_REDIRECTS} times")

    def _one(
        self, client: httpx.Client, url: httpx.URL, headers: httpx.Headers, limit: int
    ) -> Fetched | httpx.URL:
        """The answer read whole, or where it redirects to."""
        with client.stream("GET", url, headers=headers) as response:
            if response.has_redirect_location:
                return response.url.join(response.headers["location"])
            body = read_bounded(response, limit, shown_url(str(response.url)))
        next_link = response.links.get("next", {}).get("url")
        return Fetched(
            url=str(response.url),
            status=response.status_code,
            reason=response.reason_phrase,
            headers=response.headers,
            body=body,
            next_url=str(response.url.join(next_link)) if next_link else None,
        )


def check_found_url(where: str, url: httpx.URL) -> None:
    """NotFetched unless a found URL is `http`/`https` with a host and no userinfo (its
    address is checked where the connection is made)."""
    if url.scheme not in ("http", "https"):
        raise NotFetched(f"the URL is {url.scheme or 'relative'}:, not http or https")
    if url.userinfo:
        raise NotFetched(f"{where} carries a user name or password")
    if not url.host:
        raise NotFetched(f"{url!s:.80} names no host")


def shown_url(url: str) -> str:
    """Host, port and path: never the query or a `user:password@`, which may be secret."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # no URL at all: say so rather than show it
        return "an unreadable URL"
    return f"{parts.hostname or ''}{port}{parts.path}"


def _request_headers(headers: Mapping[str, str] | None) -> httpx.Headers:
    return httpx.Headers({**(headers or {}), "Accept-Encoding": ACCEPT_ENCODING})


def _hop_headers(headers: httpx.Headers, came_from: httpx.URL, to: httpx.URL) -> httpx.Headers:
    """The headers of a redirect hop: a credential stays with the origin it was meant for."""
    if (came_from.scheme, came_from.host, came_from.port) == (to.scheme, to.host, to.port):
        return headers
    return httpx.Headers({k: v for k, v in headers.items() if k.lower() not in _SECRET_HEADERS})


class _GuardedTransport(httpx.HTTPTransport):
    """httpx's own transport, its pool's connections made by the guarded backend (httpx
    takes no backend itself; its request and error mapping are kept as they are)."""

    def __init__(self, backend: GuardedBackend, tls: SSLContext) -> None:
        super().__init__(verify=tls, trust_env=False)
        self._pool = httpcore.ConnectionPool(ssl_context=tls, network_backend=backend)


@cache
def _tls_context() -> SSLContext:
    """httpx's own (SSL_CERT_FILE honoured), made once per process: loading the CA
    bundle takes ~75 ms, which every read would otherwise pay."""
    return httpx.create_ssl_context()
