"""A source's credential (docs/design.md §26): read from the environment variable its
`secret_env` names when the source is read, and sent as one header to the configured
URL's origin only, never to a host a redirect names and never in a URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from core.sources.items import SourceReadError

if TYPE_CHECKING:  # httpx loads with the read that needs it
    import httpx

DEFAULT_HEADER = "Authorization"  # sent as `Bearer <value>`; any other header: the value as is


class SecretSource(Protocol):
    """A source that may name a credential: its label and the two keys that say how."""

    @property
    def label(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def secret_env(self) -> str | None: ...

    @property
    def secret_header(self) -> str | None: ...


@dataclass(frozen=True)
class SourceSecret:
    """A source's credential as sent: one header, to the configured URL's origin only."""

    origin: tuple[str, str, int | None]  # scheme, host, port
    header: str
    value: str = field(repr=False)  # never in a log line or a traceback's locals

    def attach(self, request: httpx.Request) -> None:
        """An httpx request hook, run for every hop of a read: the header on a request to
        the configured origin, taken off any other (httpx carries every header but
        Authorization across a redirect to another host)."""
        if _origin(request.url.scheme, request.url.host, request.url.port) == self.origin:
            request.headers[self.header] = self.value
        else:
            request.headers.pop(self.header, None)


def source_secret(
    spec: SecretSource, environ: Mapping[str, str] | None = None
) -> SourceSecret | None:
    """The header `spec` sends, read from the environment now; None when it names no
    variable. A SourceReadError (not retryable) when the variable it names is unset."""
    if spec.secret_env is None:
        return None
    value = (os.environ if environ is None else environ).get(spec.secret_env, "").strip()
    if not value:
        raise SourceReadError(
            spec.label,
            f"{spec.secret_env} is not set: its secret_env names it as the source's credential",
            retryable=False,
        )
    parts = urlsplit(spec.url)
    header = spec.secret_header or DEFAULT_HEADER
    sent = value if spec.secret_header else f"Bearer {value}"
    return SourceSecret(_origin(parts.scheme, parts.hostname or "", parts.port), header, sent)


def missing_source_secret(spec: SecretSource, environ: Mapping[str, str] | None = None) -> str:
    """One line when `spec` names a variable that is unset, else "" (`galley check`)."""
    try:
        source_secret(spec, environ)
    except SourceReadError as exc:
        return exc.answer
    return ""


def _origin(scheme: str, host: str, port: int | None) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(scheme.lower())
    return scheme.lower(), host.lower(), default if port is None else port
