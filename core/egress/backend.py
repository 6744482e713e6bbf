"""Where a guarded client's connections are made: an httpcore network backend that
resolves the host itself, refuses it if any address it resolves to is refused, and
connects to the very address it checked (a second resolution cannot swap it; TLS still
names the host). Every socket wait is clamped to what is left of the read's deadline, so
a server dripping a byte at a time cannot hold a read past it. Never sends anything.
"""

from __future__ import annotations

import ipaddress
import math
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import httpcore
import httpx
from httpcore import NetworkBackend, NetworkStream, SyncBackend

from core.egress.addresses import EgressAllow, refusal_for
from core.errors import NotFetched

Resolver = Callable[[str, int], Sequence[str]]
"""(host, port) -> the addresses it names, as text; OSError when it names none."""
RequestHook = Callable[[httpx.Request], None]
"""Run on every request a read sends, each redirect hop included (a source's secret
header goes to its configured origin only: core/sources/source_secrets.py)."""
Dialer = Callable[[str, int, float | None], NetworkStream]
"""(address, port, timeout) -> a connection to that address: httpcore's own unless a test
puts a simulated network in its place; httpcore's ConnectError/ConnectTimeout if none."""


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def system_dialer(address: str, port: int, timeout: float | None) -> NetworkStream:
    return SyncBackend().connect_tcp(address, port, timeout)


class Deadline:
    """The end of one read, redirects included, on the monotonic clock; none until
    `start`."""

    def __init__(self) -> None:
        self._ends = math.inf

    def start(self, seconds: float) -> None:
        self._ends = time.monotonic() + seconds

    def left(self) -> float:
        return self._ends - time.monotonic()

    def clamp(self, timeout: float | None, expired: type[Exception]) -> float:
        """`timeout` cut to what is left; `expired` raised when nothing is."""
        left = self.left()
        if left <= 0:
            raise expired("the read's deadline passed")
        return left if timeout is None else min(timeout, left)


class DeadlineStream(NetworkStream):
    """A connection whose every wait ends by the read's deadline."""

    def __init__(self, inner: NetworkStream, deadline: Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._deadline.clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._deadline.clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> NetworkStream:
        clamped = self._deadline.clamp(timeout, httpcore.ConnectTimeout)
        inner = self._inner.start_tls(ssl_context, server_hostname, clamped)
        return DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class GuardedBackend(NetworkBackend):
    """Connects only to addresses the rules let through (`allow` None: a configured
    URL's first request, trusted as the operator wrote it, still connected to the address
    resolved and under the deadline)."""

    def __init__(
        self,
        allow: EgressAllow | None,
        deadline: Deadline,
        *,
        resolver: Resolver = system_resolver,
        dialer: Dialer = system_dialer,
    ) -> None:
        self._allow = allow
        self._deadline = deadline
        self._resolver = resolver
        self._dialer = dialer

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> NetworkStream:
        addresses = self._checked(host, port)
        failure: Exception = httpcore.ConnectError(f"{host} resolved to no address")
        for address in addresses:
            wait = self._deadline.clamp(timeout, httpcore.ConnectTimeout)
            try:
                return DeadlineStream(self._dialer(address, port, wait), self._deadline)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc  # the next address, as a browser would
        raise failure

    def _checked(self, host: str, port: int) -> list[str]:
        """Every address `host` resolves to, once; NotFetched if any is refused (one
        refused address is enough: which one a client would pick is not ours to say)."""
        try:
            addresses = [str(ipaddress.ip_address(host))]  # a literal is not resolved
        except ValueError:
            addresses = self._resolved(host, port)
        if self._allow is None:
            return addresses
        for address in addresses:
            refusal = refusal_for(host, ipaddress.ip_address(address), self._allow)
            if refusal is not None:
                raise NotFetched(refusal.words)
        return addresses

    def _resolved(self, host: str, port: int) -> list[str]:
        try:
            return list(self._resolver(host, port))
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} does not resolve: {exc}") from exc

    def sleep(self, seconds: float) -> None:
        time.sleep(min(seconds, max(0.0, self._deadline.left())))
