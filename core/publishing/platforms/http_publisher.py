"""What every adapter speaking a platform's REST API over `httpx` keeps: its target's
settings, the environment its secret is read from when a call needs it, the call's
timeouts, and one client that never follows a redirect (a platform's answer is read as it
came; docs/design.md §33, the trust boundary)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Generic, TypeVar

import httpx

from core.http_calls import call_timeout
from core.setup.publish_targets import SecretTarget

TargetT = TypeVar("TargetT", bound=SecretTarget)


class HttpPublisher(Generic[TargetT]):
    def __init__(
        self,
        target: TargetT,
        timeout: timedelta,
        environ: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.config: TargetT = target
        self._environ = environ
        limits = call_timeout(timeout)
        self._timeout = httpx.Timeout(limits.phase, connect=limits.connect)
        self._client = client or httpx.Client(follow_redirects=False)

    @property
    def target(self) -> str:
        return self.config.target

    def close(self) -> None:
        self._client.close()
