"""Tests send nothing off this machine (docs/design.md §33): a name a test's code asks the
system to resolve is answered only when it is this machine's own (`localhost`) or an
address literal; any other name is refused as unknown, before a DNS query could leave for
the machine's nameserver. Other addresses are simulated at the guarded client's resolver
and dialer (`Egress(resolver=…, dialer=…)`), never resolved for real.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

LOCAL_NAMES = frozenset({"localhost", "localhost."})


def is_local(host: object) -> bool:
    """An address literal (its connection is the guard's to judge) or `localhost`."""
    if host is None:
        return True
    name = host.decode() if isinstance(host, bytes) else str(host)
    if name.lower() in LOCAL_NAMES:
        return True
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    return True


@contextmanager
def names_resolved_locally() -> Iterator[None]:
    """socket.getaddrinfo refusing every name `is_local` does not accept, for the test."""
    resolve: Callable[..., Any] = socket.getaddrinfo

    def local_only(host: object, *args: Any, **kwargs: Any) -> Any:
        if not is_local(host):
            raise socket.gaierror(
                socket.EAI_NONAME, f"tests resolve no name off this machine: {host}"
            )
        return resolve(host, *args, **kwargs)

    socket.getaddrinfo = local_only
    try:
        yield
    finally:
        socket.getaddrinfo = resolve
