"""How a reader goes out (docs/design.md §33): the `[egress] allow` list and, in tests
only, a resolver and a dialer that simulate the network, so no packet leaves for a
refused address. Light on purpose: a read command that never fetches carries it in its
config without loading httpx, which loads with the first client made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.egress.addresses import EgressAllow

if TYPE_CHECKING:
    from core.egress.backend import Dialer, RequestHook, Resolver
    from core.egress.client import EgressClient


@dataclass(frozen=True)
class Egress:
    """`allow`: the networks and hosts found URLs may reach besides global addresses;
    `resolver` and `dialer`: the system's unless a test simulates the network."""

    allow: EgressAllow = field(default_factory=EgressAllow)
    resolver: Resolver | None = None
    dialer: Dialer | None = None

    def client(self, timeout: float, on_request: Sequence[RequestHook] = ()) -> EgressClient:
        from core.egress.backend import system_dialer, system_resolver
        from core.egress.client import EgressClient

        return EgressClient(
            self.allow,
            timeout=timeout,
            resolver=self.resolver or system_resolver,
            dialer=self.dialer or system_dialer,
            on_request=on_request,
        )
