"""The bot token goes only to Slack's file host, over https, never to a redirect, and a
download is bounded in bytes and in total time (docs/design.md §34), through the one
guarded client (docs/design.md §33). The refusals of a link are decided before any
connection (a simulated network records every address it is asked to dial); the bounds
and the redirect are tested against local servers."""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Iterator, Sequence

import httpcore
import pytest

from bot.slack_files import SLACK_FILE_ORIGIN, SlackFiles, file_origin
from core.egress.way_out import Egress
from tests.fakes.web import FakeWeb, status
from tests.harness.timing import scaled


def test_slacks_own_api_downloads_from_its_file_host_and_a_stand_in_from_its_own_origin() -> None:
    assert file_origin("https://slack.com/api/") == SLACK_FILE_ORIGIN
    assert file_origin("https://acme.enterprise.slack.com/api/") == SLACK_FILE_ORIGIN
    assert file_origin("http://127.0.0.1:8080/api/") == "http://127.0.0.1:8080"
    assert file_origin("https://slack-proxy.internal/api/") == "https://slack-proxy.internal:443"


class NoNetwork:
    """A resolver and a dialer that record what they are asked and never connect: a
    broken rule is caught here, and no packet leaves."""

    def __init__(self) -> None:
        self.resolved: list[tuple[str, int]] = []
        self.dialled: list[tuple[str, int]] = []

    def resolve(self, host: str, port: int) -> Sequence[str]:
        self.resolved.append((host, port))
        return ["192.0.2.1"]  # TEST-NET-1: never dialled, the dialer refuses first

    def dial(self, address: str, port: int, timeout: float | None) -> httpcore.NetworkStream:
        self.dialled.append((address, port))
        raise httpcore.ConnectError(f"simulated: {address} is not reachable in tests")

    def egress(self) -> Egress:
        return Egress(resolver=self.resolve, dialer=self.dial)


@pytest.mark.parametrize(
    "link",
    [
        "http://files.slack.com/files-pri/T1-F1/a.png",  # not https
        "https://files.slack.com:8443/files-pri/T1-F1/a.png",
        "https://files.slack.com.attacker.example/files-pri/T1-F1/a.png",
        "https://attacker.example/files-pri/T1-F1/a.png",
        "https://files.slack.com@attacker.example/a.png",
        "https://user@files.slack.com/files-pri/T1-F1/a.png",
    ],
)
def test_a_link_anywhere_but_slacks_file_host_over_https_is_not_downloaded(link: str) -> None:
    network = NoNetwork()
    files = SlackFiles("xoxb-secret", egress=network.egress())
    told = files.download({"url_private_download": link})
    assert isinstance(told, str) and told.startswith("not downloaded: its link is not Slack's")
    assert network.dialled == [] and network.resolved == []


@pytest.mark.slow
def test_a_file_larger_than_the_cap_is_refused_from_its_length() -> None:
    with FakeWeb() as web:
        url = web.publish("/files-pri/T1-F1/big.png", b"x" * 2048, "image/png")
        files = SlackFiles("xoxb-test", web.url, max_bytes=1024)
        assert str(files.download({"url_private_download": url})).startswith("it is over")
        assert files.download({"url_private_download": url, "size": 2048}).startswith("it is over")
        small = SlackFiles("xoxb-test", web.url, max_bytes=4096)
        assert small.download({"url_private_download": url}) == b"x" * 2048


@pytest.mark.slow
def test_a_gzip_download_is_decoded_under_the_cap_and_another_coding_refused_by_name() -> None:
    with FakeWeb() as web:
        gzipped = {"Content-Encoding": "gzip"}
        small = web.publish(
            "/files-pri/T1-F1/a.png", gzip.compress(b"png" * 100), "image/png", gzipped
        )
        bomb = web.publish(
            "/files-pri/T1-F1/b.png", gzip.compress(b"\0" * 4096), "image/png", gzipped
        )
        brotli = web.publish(
            "/files-pri/T1-F1/c.png", b"br", "image/png", {"Content-Encoding": "br"}
        )
        files = SlackFiles("xoxb-test", web.url, max_bytes=1024)
        assert files.download({"url_private_download": small}) == b"png" * 100
        assert str(files.download({"url_private_download": bomb})).startswith("it is over")
        told = files.download({"url_private_download": brotli})
        assert told == (
            f"not downloaded: the answer from 127.0.0.1:{web.port}/files-pri/T1-F1/c.png is "
            "encoded as 'br': only gzip, deflate or none is accepted"
        )


@pytest.mark.slow
def test_a_redirect_from_the_file_host_is_not_followed_and_the_token_goes_nowhere_else() -> None:
    with FakeWeb() as web, FakeWeb() as elsewhere:
        there = elsewhere.publish("/a.png", b"png", "image/png")
        web.script("/files-pri/T1-F1/moved.png", status(302, headers={"Location": there}))
        files = SlackFiles("xoxb-test", web.url)
        told = files.download({"url_private_download": f"{web.url}/files-pri/T1-F1/moved.png"})
        assert told == "not downloaded: Slack answered with a redirect"
        [asked] = web.requests
        assert asked.headers["authorization"] == "Bearer xoxb-test"
        assert elsewhere.requests == []


@pytest.fixture
def trickle() -> Iterator[str]:
    """A file host that sends its headers, then one byte every 50 ms for 10 s, never timing
    out a read: only a deadline on the whole download ends it sooner."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 200\r\n\r\n"
            )
            while not stop.wait(0.05):
                try:
                    connection.sendall(b"x")
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
        thread.join(scaled(5))


@pytest.mark.slow
def test_a_download_trickling_past_its_deadline_is_given_up(trickle: str) -> None:
    files = SlackFiles("xoxb-test", trickle, deadline=0.5)
    told = files.download({"url_private_download": f"{trickle}/files-pri/T1-F1/slow.png"})
    assert told == "the download took over 0.5 s"  # not the 200 bytes, 10 s later
