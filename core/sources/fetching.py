"""One GET of a source's server, classified as a model call's failure is (docs/design.md
§8, §26): timeouts, 5xx, 429 and 304 may help to ask again; 401/403/404 and other 4xx
never do. Never retries or sleeps itself: the run's attempt policy decides.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from core.egress.client import IMAGE_BYTES, PAGE_BYTES, Closing, Fetched, shown_url
from core.errors import NotFetched
from core.sources.items import ReadContext, SourceReadError
from core.sources.source_secrets import SourceSecret

MAX_ANSWER_BYTES = PAGE_BYTES
MAX_IMAGE_BYTES = IMAGE_BYTES
USER_AGENT = "Galley (source reader)"
_ANSWER_EXCERPT = 200

__all__ = ["SourceClient", "fetch", "get", "shown_url", "source_client"]


class SourceClient(Closing):
    """One source read's way out (core/egress): the guarded client, our user agent and
    the source's headers, each GET bounded as a whole by the recipe's `call_timeout`
    (redirects included), which is also each socket wait's limit."""

    def __init__(
        self,
        context: ReadContext,
        headers: Mapping[str, str] | None,
        secret: SourceSecret | None = None,
    ) -> None:
        self.egress = context.egress.client(
            context.timeout, on_request=[secret.attach] if secret else []
        )
        self.headers = {"User-Agent": USER_AGENT, **(headers or {})}
        self.deadline = context.timeout

    def close(self) -> None:
        self.egress.close()


def source_client(
    context: ReadContext,
    headers: Mapping[str, str] | None = None,
    secret: SourceSecret | None = None,
) -> SourceClient:
    """A client for one source's read: its time limits, redirects followed (each hop
    checked), our user agent, and the source's `secret` header on each request to the
    configured origin only."""
    return SourceClient(context, headers, secret)


def fetch(
    client: SourceClient,
    source: str,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    limit: int | None = None,
    configured: bool = False,
) -> Fetched:
    """GET `url`; its answer when 2xx, else SourceReadError naming `source`, the status
    and what the server said."""
    answer = get(client, source, url, params=params, limit=limit, configured=configured)
    if not answer.ok:
        raise status_error(source, answer)
    return answer


def get(
    client: SourceClient,
    source: str,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    limit: int | None = None,
    configured: bool = False,
) -> Fetched:
    """GET `url`: its answer whatever its status (the body at most `limit` bytes,
    MAX_ANSWER_BYTES unless told), or a SourceReadError: retryable when no answer came,
    not when the URL was refused or a bound passed (docs/design.md §33). `configured`:
    the operator wrote `url`, so its first request is trusted; a found URL never is."""
    where = shown_url(url)
    try:
        fetched = client.egress.get(
            url,
            limit=limit or MAX_ANSWER_BYTES,
            deadline=client.deadline,
            configured=configured,
            headers=client.headers,
            params=params,
        )
    except NotFetched as refused:
        raise SourceReadError(source, str(refused), retryable=refused.retryable) from refused
    except httpx.TimeoutException as exc:
        raise SourceReadError(
            source, f"no answer from {where} in time ({type(exc).__name__})", retryable=True
        ) from exc
    except httpx.HTTPError as exc:
        raise SourceReadError(source, f"cannot reach {where}: {exc}", retryable=True) from exc
    return fetched


def status_error(source: str, answer: Fetched, *, retryable: bool | None = None) -> SourceReadError:
    """The failure a non-2xx answer is: retryable as its status says, unless told."""
    if retryable is None:
        retryable = retryable_status(answer.status)
    return SourceReadError(source, status_answer(answer), retryable=retryable)


def retryable_status(code: int) -> bool:
    """304 (nothing sent this time), 408, 425, 429 and 5xx may pass; other 4xx never do."""
    return code in (304, 408, 425, 429) or code >= 500


def status_answer(answer: Fetched) -> str:
    """One line: `HTTP 404 Not Found from host/path: what it said`."""
    said = " ".join(answer.body[:_ANSWER_EXCERPT].decode("utf-8", "replace").split())
    line = f"HTTP {answer.status} {answer.reason} from {shown_url(answer.url)}".rstrip()
    return f"{line}: {said}" if said else line
