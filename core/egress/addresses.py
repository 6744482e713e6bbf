"""Which addresses a found URL may reach (docs/design.md §33): pure rules, no network.

An address is fetched only if it is global: loopback, private, link-local, CGNAT,
unique-local, multicast, unspecified, reserved and documentation ranges are refused, and
so are their IPv4-mapped, IPv4-compatible, 6to4 and NAT64 forms (the model: Synapse's
URL-preview blacklist and Mastodon's PrivateAddressCheck). `[egress] allow` names the
networks or hosts an operator lets through. Never resolves a name itself.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_HOST_NAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")


class AddressRefusal(StrEnum):
    """Why an address is not fetched; `words` is what a note shows."""

    LOOPBACK = "loopback"
    PRIVATE = "private"
    LINK_LOCAL = "link_local"
    SHARED = "shared"  # CGNAT, 100.64.0.0/10
    UNIQUE_LOCAL = "unique_local"
    MULTICAST = "multicast"
    UNSPECIFIED = "unspecified"
    DOCUMENTATION = "documentation"
    RESERVED = "reserved"  # anything else that is not global

    @property
    def words(self) -> str:
        return _WORDS[self]


_WORDS = {
    AddressRefusal.LOOPBACK: "the address is loopback",
    AddressRefusal.PRIVATE: "the address is private",
    AddressRefusal.LINK_LOCAL: "the address is link-local",
    AddressRefusal.SHARED: "the address is shared (carrier-grade NAT)",
    AddressRefusal.UNIQUE_LOCAL: "the address is unique-local",
    AddressRefusal.MULTICAST: "the address is multicast",
    AddressRefusal.UNSPECIFIED: "the address is unspecified",
    AddressRefusal.DOCUMENTATION: "the address is for documentation only",
    AddressRefusal.RESERVED: "the address is reserved, not public",
}


def _nets(refusal: AddressRefusal, *cidrs: str) -> list[tuple[IPNetwork, AddressRefusal]]:
    return [(ipaddress.ip_network(cidr), refusal) for cidr in cidrs]


# Checked in order, the first match wins; an address in none of them must still be
# global (Python's registry of special ranges) to pass.
_REFUSED_V4 = [
    *_nets(AddressRefusal.UNSPECIFIED, "0.0.0.0/8"),
    *_nets(AddressRefusal.LOOPBACK, "127.0.0.0/8"),
    *_nets(AddressRefusal.PRIVATE, "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
    *_nets(AddressRefusal.LINK_LOCAL, "169.254.0.0/16"),
    *_nets(AddressRefusal.SHARED, "100.64.0.0/10"),
    *_nets(AddressRefusal.MULTICAST, "224.0.0.0/4"),
    *_nets(AddressRefusal.DOCUMENTATION, "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"),
    *_nets(AddressRefusal.RESERVED, "192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4"),
]
_REFUSED_V6 = [
    *_nets(AddressRefusal.UNSPECIFIED, "::/128"),
    *_nets(AddressRefusal.LOOPBACK, "::1/128"),
    *_nets(AddressRefusal.LINK_LOCAL, "fe80::/10"),
    *_nets(AddressRefusal.UNIQUE_LOCAL, "fc00::/7"),
    *_nets(AddressRefusal.MULTICAST, "ff00::/8"),
    *_nets(AddressRefusal.DOCUMENTATION, "2001:db8::/32", "3fff::/20"),
    *_nets(AddressRefusal.RESERVED, "fec0::/10", "64:ff9b:1::/48", "100::/64", "2001::/23"),
]
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")


def address_refusal(address: IPAddress) -> AddressRefusal | None:
    """Why `address` may not be fetched; None for a global address. An IPv6 address that
    carries an IPv4 one (mapped, compatible, 6to4, NAT64) is judged by the IPv4 one."""
    embedded = embedded_ipv4(address)
    if embedded is not None:
        return address_refusal(embedded)
    table = _REFUSED_V4 if isinstance(address, ipaddress.IPv4Address) else _REFUSED_V6
    for network, refusal in table:
        if address in network:
            return refusal
    return None if address.is_global else AddressRefusal.RESERVED


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for, if any: `::ffff:a.b.c.d`, `::a.b.c.d`,
    `2002:aabb:ccdd::/48` (6to4) or `64:ff9b::a.b.c.d` (NAT64)."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True)
class EgressAllow:
    """`[egress] allow`: networks and host names let through although not global (a feed
    behind the firewall, a test's local server). Empty by default."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()

    def lets_through(self, host: str, address: IPAddress) -> bool:
        """Whether `address`, which `host` resolved to, is allowed by name or network."""
        if normal_host(host) in self.hosts:
            return True
        judged = [address, *filter(None, [embedded_ipv4(address)])]
        return any(a in network for a in judged for network in self.networks)


def refusal_for(host: str, address: IPAddress, allow: EgressAllow) -> AddressRefusal | None:
    """Why `host`, resolved to `address`, may not be fetched; None if it may."""
    if allow.lets_through(host, address):
        return None
    return address_refusal(address)


def parse_allow(entries: Iterable[str]) -> tuple[EgressAllow, list[str]]:
    """`[egress] allow` read: the allow list, and one line per entry that is neither a
    network (CIDR, or one address) nor a host name."""
    networks: list[IPNetwork] = []
    hosts: set[str] = set()
    problems: list[str] = []
    for entry in entries:
        network = _network(entry)
        if network is not None:
            networks.append(network)
        elif _HOST_NAME.match(normal_host(entry)) and "/" not in entry:
            hosts.add(normal_host(entry))
        else:
            problems.append(
                f"[egress]: allow: {entry!r} is neither a network (10.20.0.0/16) "
                "nor a host name (feeds.intranet.example)"
            )
    return EgressAllow(tuple(networks), frozenset(hosts)), problems


def _network(entry: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(entry.strip(), strict=True)
    except ValueError:
        return None


def normal_host(host: str) -> str:
    """A host name as compared: lower case, no trailing dot, no IPv6 brackets."""
    return host.strip().strip("[]").rstrip(".").lower()
