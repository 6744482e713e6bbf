"""The guarded client over real sockets (docs/design.md §33): where it connects, how it
follows redirects, and the bounds of each read. Servers listen on 127.0.0.1 (reached only
through `[egress] allow`) and 127.0.0.2 (an "inside" server nothing may reach); any other
address (10.x, 169.254.169.254, a public one) is simulated at the resolver and the
dialer, so a broken guard fails the test without a packet leaving the machine."""

from __future__ import annotations

import gzip
import ipaddress
import random
import time
import tracemalloc
from collections.abc import Iterator, Sequence

import httpcore
import pytest

from core.egress.addresses import EgressAllow, parse_allow
from core.egress.backend import system_dialer
from core.egress.way_out import Egress
from core.errors import NotFetched
from core.policies import FetchStop
from tests.fakes.web import FakeWeb, drip, status
from tests.harness.slow_marks import starts_a_server
from tests.harness.timing import scaled
from tests.sources.specs import LOCAL_FAKES

PUBLIC = "93.184.216.34"  # simulated: the dialer sends it to the local fake on 127.0.0.1
NO_ALLOW = EgressAllow()


class Network:
    """A simulated resolver and dialer: names answer what `names` says (a list is
    answered in turn, the last one kept), PUBLIC is dialled on 127.0.0.1, 127.0.0.x as
    itself; anything else is refused before a packet could leave, and recorded."""

    def __init__(self, names: dict[str, list[list[str]]]) -> None:
        self.names = names
        self.resolved: list[str] = []
        self.dialled: list[str] = []

    def resolve(self, host: str, port: int) -> Sequence[str]:
        self.resolved.append(host)
        answers = self.names[host]
        return answers.pop(0) if len(answers) > 1 else answers[0]

    def dial(self, address: str, port: int, timeout: float | None) -> httpcore.NetworkStream:
        self.dialled.append(address)
        try:
            ipaddress.ip_address(address)
        except ValueError:  # a name: resolved again, as the system would
            address = self.resolve(address, port)[0]
        if address == PUBLIC:
            address = "127.0.0.1"
        if not address.startswith("127."):
            raise httpcore.ConnectError(f"simulated: {address} is not reachable in tests")
        return system_dialer(address, port, timeout)

    def egress(self, allow: EgressAllow = NO_ALLOW) -> Egress:
        return Egress(allow, resolver=self.resolve, dialer=self.dial)


@pytest.fixture
@starts_a_server
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as server:
        yield server


@pytest.fixture
@starts_a_server
def inside(web: FakeWeb) -> Iterator[FakeWeb]:
    """An inside server on 127.0.0.2, on the same port as `web` (so a swapped address
    would reach it)."""
    server = FakeWeb(host="127.0.0.2")
    server._bind_port = web.port
    with server:
        yield server


def get(egress: Egress, url: str, *, limit: int = 1_000_000, deadline: float = 5.0) -> bytes:
    with egress.client(timeout=deadline) as client:
        return client.get(url, limit=limit, deadline=deadline).body


def test_a_name_resolving_to_loopback_is_refused_and_nothing_is_sent(web: FakeWeb) -> None:
    web.publish("/a", "secret", "text/plain")
    net = Network({"evil.example": [["127.0.0.1"]]})

    with pytest.raises(NotFetched) as raised:
        get(net.egress(), f"http://evil.example:{web.port}/a")

    assert str(raised.value) == "not fetched: the address is loopback"
    assert web.gets("/a") == 0 and net.dialled == []


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("10.0.0.5", "the address is private"),
        ("169.254.169.254", "the address is link-local"),
        ("::ffff:169.254.169.254", "the address is link-local"),
        ("64:ff9b::a9fe:a9fe", "the address is link-local"),
        ("100.64.0.1", "the address is shared (carrier-grade NAT)"),
        ("fd00::1", "the address is unique-local"),
    ],
)
def test_a_name_resolving_inside_is_refused_before_any_connection(address: str, why: str) -> None:
    net = Network({"evil.example": [[address]]})

    with pytest.raises(
        NotFetched, match=f"^not fetched: {why.replace('(', '.').replace(')', '.')}$"
    ):
        get(net.egress(), "http://evil.example/latest/meta-data/")

    assert net.dialled == []


def test_one_inside_address_among_public_ones_refuses_the_name(web: FakeWeb) -> None:
    web.publish("/a", "hello", "text/plain")
    net = Network({"mixed.example": [[PUBLIC, "10.0.0.5"]]})

    with pytest.raises(NotFetched, match="the address is private"):
        get(net.egress(), f"http://mixed.example:{web.port}/a")

    assert net.dialled == [] and web.gets("/a") == 0


def test_a_public_name_is_fetched_at_the_address_checked(web: FakeWeb, inside: FakeWeb) -> None:
    """The name answers a public address first and an inside one after (DNS rebinding):
    the connection goes to the address that was checked, never to a second answer."""
    web.publish("/a", "public", "text/plain")
    inside.publish("/a", "inside", "text/plain")
    net = Network({"rebind.example": [[PUBLIC], ["127.0.0.2"]]})

    assert get(net.egress(), f"http://rebind.example:{web.port}/a") == b"public"

    assert web.gets("/a") == 1 and inside.gets("/a") == 0
    assert net.dialled == [PUBLIC]


def test_allow_lets_a_named_inside_host_through(inside: FakeWeb) -> None:
    inside.publish("/feed.xml", "inside feed", "text/plain")
    net = Network({"feeds.intranet.example": [["127.0.0.2"]]})
    allow, problems = parse_allow(["feeds.intranet.example"])
    assert problems == []

    url = f"http://feeds.intranet.example:{inside.port}/feed.xml"
    assert get(net.egress(allow), url) == b"inside feed"
    with pytest.raises(NotFetched, match="loopback"):  # not by its address alone
        get(net.egress(LOCAL_FAKES), f"http://127.0.0.2:{inside.port}/feed.xml")

    assert inside.gets("/feed.xml") == 1


def test_a_redirect_inside_is_refused_even_from_a_configured_url(
    web: FakeWeb, inside: FakeWeb
) -> None:
    inside.publish("/admin", "inside page", "text/html")
    web.script("/page", status(302, headers={"Location": f"{inside.url}/admin"}))

    with (
        Egress(LOCAL_FAKES).client(timeout=5) as client,
        pytest.raises(NotFetched, match="the address is loopback"),
    ):
        client.get(f"{web.url}/page", limit=1000, deadline=5, configured=True)

    assert web.gets("/page") == 1 and inside.gets("/admin") == 0


def test_a_redirect_is_not_followed_when_the_reader_follows_none(web: FakeWeb) -> None:
    web.publish("/there", "elsewhere", "text/plain")
    web.script("/here", status(302, headers={"Location": f"{web.url}/there"}))

    with (
        Egress(LOCAL_FAKES).client(timeout=5) as client,
        pytest.raises(NotFetched, match="answered with a redirect: not followed") as raised,
    ):
        client.get(f"{web.url}/here", limit=1000, deadline=5, follow_redirects=False)

    assert raised.value.stop is FetchStop.REDIRECT
    assert web.gets("/here") == 1 and web.gets("/there") == 0


def test_a_found_url_with_a_password_or_another_scheme_is_refused(web: FakeWeb) -> None:
    web.publish("/a", "hello", "text/plain")
    with Egress(LOCAL_FAKES).client(timeout=5) as client:
        with pytest.raises(NotFetched, match="carries a user name or password"):
            client.get(f"http://u:p@127.0.0.1:{web.port}/a", limit=1000, deadline=5)
        with pytest.raises(NotFetched, match="the URL is file:, not http or https"):
            client.get("file:///etc/passwd", limit=1000, deadline=5)
    assert web.gets("/a") == 0


def test_a_gzip_bomb_is_refused_without_inflating_past_the_cap(web: FakeWeb) -> None:
    limit = 1_000_000
    bomb = gzip.compress(b"\0" * 100_000_000, compresslevel=9)  # ~100 KB on the wire
    web.publish("/bomb", bomb, "text/html", headers={"Content-Encoding": "gzip"})

    tracemalloc.start()
    try:
        with pytest.raises(
            NotFetched, match=r"^not fetched: the answer from .*/bomb is over 1,000,000 bytes$"
        ):
            get(Egress(LOCAL_FAKES), f"{web.url}/bomb", limit=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert len(bomb) < limit and peak < 3 * limit  # never a whole chunk's 100 MB


def test_a_gzip_answer_under_the_cap_is_decoded(web: FakeWeb) -> None:
    body = b"<p>hello</p>" * 1000
    web.publish("/ok", gzip.compress(body), "text/html", headers={"Content-Encoding": "gzip"})

    assert get(Egress(LOCAL_FAKES), f"{web.url}/ok") == body
    [request] = web.requests
    assert request.headers["accept-encoding"] == "gzip, deflate"


def test_a_zstd_answer_is_refused_by_name(web: FakeWeb) -> None:
    web.publish("/z", b"(\xb5/\xfd" + b"\0" * 64, "text/html", headers={"Content-Encoding": "zstd"})

    with pytest.raises(NotFetched, match="encoded as 'zstd': only gzip, deflate or none"):
        get(Egress(LOCAL_FAKES), f"{web.url}/z")


def test_an_answer_over_the_wire_cap_is_refused(web: FakeWeb) -> None:
    web.publish("/big", b"x" * 5000, "text/html")

    with pytest.raises(NotFetched, match="over 1,000 bytes"):
        get(Egress(LOCAL_FAKES), f"{web.url}/big", limit=1000)


def test_a_compressed_answer_over_the_wire_cap_is_refused_though_it_decodes_under(
    web: FakeWeb,
) -> None:
    body = random.Random(7).randbytes(3000)  # incompressible: gzip makes it larger
    web.publish("/noise", gzip.compress(body), "text/plain", headers={"Content-Encoding": "gzip"})

    with pytest.raises(NotFetched, match="over 3,010 bytes"):
        get(Egress(LOCAL_FAKES), f"{web.url}/noise", limit=3010)


def test_a_server_dripping_bytes_is_cut_at_the_reads_total_deadline(web: FakeWeb) -> None:
    """One byte every 0.2 s never lets a 1 s socket read time out; the read's deadline,
    enforced at the socket, ends it anyway."""
    deadline = 1.0
    web.publish("/drip", b"x" * 100, "text/plain")  # 20 s at 0.2 s a byte
    web.script("/drip", drip(0.2))

    started = time.monotonic()
    with pytest.raises(NotFetched, match=r"in time \(the deadline is 1s\)") as raised:
        get(Egress(LOCAL_FAKES), f"{web.url}/drip", deadline=deadline)
    elapsed = time.monotonic() - started

    assert raised.value.retryable is True
    assert deadline <= elapsed < deadline + scaled(0.5)
