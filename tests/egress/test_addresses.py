"""The address rules of the guarded client (docs/design.md §33), on their own: which
addresses a found URL may reach, IPv4 and IPv6 and the IPv6 forms that carry IPv4 ones,
and what `[egress] allow` lets through. Pure: nothing is resolved or connected."""

from __future__ import annotations

import ipaddress

import pytest

from core.egress.addresses import (
    AddressRefusal,
    EgressAllow,
    address_refusal,
    parse_allow,
    refusal_for,
)
from core.errors import ConfigError
from core.setup.config import parse_config

R = AddressRefusal

REFUSED = [
    ("127.0.0.1", R.LOOPBACK),
    ("127.255.0.9", R.LOOPBACK),
    ("10.0.0.5", R.PRIVATE),
    ("172.16.3.4", R.PRIVATE),
    ("192.168.1.1", R.PRIVATE),
    ("169.254.169.254", R.LINK_LOCAL),  # the cloud metadata service
    ("100.64.0.1", R.SHARED),
    ("0.0.0.0", R.UNSPECIFIED),
    ("224.0.0.1", R.MULTICAST),
    ("192.0.2.7", R.DOCUMENTATION),
    ("198.51.100.7", R.DOCUMENTATION),
    ("203.0.113.7", R.DOCUMENTATION),
    ("240.0.0.1", R.RESERVED),
    ("255.255.255.255", R.RESERVED),
    ("198.18.0.1", R.RESERVED),
    ("::1", R.LOOPBACK),
    ("::", R.UNSPECIFIED),
    ("fe80::1", R.LINK_LOCAL),
    ("fc00::1", R.UNIQUE_LOCAL),
    ("fd12:3456::1", R.UNIQUE_LOCAL),
    ("ff02::1", R.MULTICAST),
    ("2001:db8::1", R.DOCUMENTATION),
    ("fec0::1", R.RESERVED),
    ("64:ff9b:1::1", R.RESERVED),
    # IPv6 forms of IPv4 addresses are judged by the IPv4 address they carry
    ("::ffff:127.0.0.1", R.LOOPBACK),  # IPv4-mapped
    ("::ffff:10.0.0.5", R.PRIVATE),
    ("::ffff:169.254.169.254", R.LINK_LOCAL),
    ("::127.0.0.1", R.LOOPBACK),  # IPv4-compatible
    ("::10.1.2.3", R.PRIVATE),
    ("64:ff9b::a9fe:a9fe", R.LINK_LOCAL),  # NAT64 of 169.254.169.254
    ("64:ff9b::7f00:1", R.LOOPBACK),  # NAT64 of 127.0.0.1
    ("2002:7f00:1::", R.LOOPBACK),  # 6to4 of 127.0.0.1
    ("2002:a00:5::1", R.PRIVATE),  # 6to4 of 10.0.0.5
]

GLOBAL = [
    "1.1.1.1",
    "8.8.8.8",
    "93.184.216.34",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
]


@pytest.mark.parametrize(("address", "refusal"), REFUSED)
def test_an_address_that_is_not_global_is_refused_naming_why(
    address: str, refusal: AddressRefusal
) -> None:
    assert address_refusal(ipaddress.ip_address(address)) == refusal


@pytest.mark.parametrize("address", GLOBAL)
def test_a_global_address_is_fetched(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None


def test_each_refusal_says_why_in_one_line() -> None:
    assert R.PRIVATE.words == "the address is private"
    assert all(r.words.startswith("the address is ") and "\n" not in r.words for r in R)


def test_allow_lets_named_networks_and_hosts_through_and_nothing_else() -> None:
    allow, problems = parse_allow(["10.20.0.0/16", "Feeds.Intranet.Example.", "fd00::/8"])
    assert problems == []

    def judged(host: str, address: str) -> AddressRefusal | None:
        return refusal_for(host, ipaddress.ip_address(address), allow)

    assert judged("x.example", "10.20.3.4") is None
    assert judged("x.example", "::ffff:10.20.3.4") is None  # mapped: the same network
    assert judged("x.example", "fd00::5") is None
    assert judged("feeds.intranet.example", "10.99.0.1") is None  # by name
    assert judged("x.example", "10.21.0.1") == R.PRIVATE
    assert judged("x.example", "127.0.0.1") == R.LOOPBACK  # no default lets loopback in
    assert judged("other.intranet.example", "169.254.169.254") == R.LINK_LOCAL


def test_an_allow_entry_that_is_neither_a_network_nor_a_host_is_one_line() -> None:
    allow, problems = parse_allow(["10.20.0.0/16", "10.20.0.0/33", "10.20.0.1/16", "http://x"])

    assert allow.networks == (ipaddress.ip_network("10.20.0.0/16"),)
    assert len(problems) == 3
    assert problems[0] == (
        "[egress]: allow: '10.20.0.0/33' is neither a network (10.20.0.0/16) "
        "nor a host name (feeds.intranet.example)"
    )


def test_a_bad_egress_allow_entry_is_one_line_from_the_config_check() -> None:
    text = '[slack]\nreview_channel = "C0REVIEW"\n[egress]\nallow = ["10.20.0.0/16", "10.0.0.0/33"]'

    with pytest.raises(ConfigError) as raised:
        parse_config(text)

    assert raised.value.problems == [
        "[egress]: allow: '10.0.0.0/33' is neither a network (10.20.0.0/16) "
        "nor a host name (feeds.intranet.example)"
    ]


def test_egress_allow_is_empty_unless_configured() -> None:
    config = parse_config('[slack]\nreview_channel = "C0REVIEW"\n')

    assert config.egress == EgressAllow()
    assert refusal_for("x", ipaddress.ip_address("127.0.0.1"), config.egress) == R.LOOPBACK
