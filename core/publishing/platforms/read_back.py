"""What a platform's answer to reading a published post back means (docs/design.md §28),
written once for every adapter: found, gone (only a 404 or 410 says so), or cannot tell,
with the wait the platform named. A read that cannot tell is never taken as gone."""

from __future__ import annotations

from core.http_calls import retry_after_seconds
from core.ports import PostFound, PostGone, PostRead, PostUnknown

GONE = frozenset({404, 410})  # deleted, or never visible to us


def read_back(status: int, retry_after: str | None, detail: str, answered: str) -> PostRead:
    """`status` the platform's HTTP answer, `retry_after` its Retry-After header, `detail`
    what it said; `answered` names the read for the "cannot tell" line."""
    if status == 200:
        return PostFound()
    if status in GONE:
        return PostGone(status, detail)
    return PostUnknown(f"{answered} answered {status}: {detail}", retry_after_seconds(retry_after))
