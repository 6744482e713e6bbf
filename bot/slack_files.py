"""A Slack file's bytes, downloaded with the bot token (docs/design.md §34): the token goes
only to Slack's file host, over https, and never to a redirect; the read is bounded in
bytes (on the wire, no content coding) and in total time.

A file object's URL is found, not configured: whoever shared the file, or a forged event,
may name any host there. It must never carry the token anywhere but Slack's file host.

Slack answers a download without a valid token with its sign-in page (200, HTML), never
an error: a download is taken only when Slack sent bytes that are not that page.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

SLACK_FILE_ORIGIN = "https://files.slack.com"
MAX_DOWNLOAD = 50 * 1024 * 1024  # bytes: larger files are refused, before or while reading
DOWNLOAD_DEADLINE = 60.0  # seconds for the whole download, however slowly it trickles
READ_TIMEOUT = 15.0  # seconds for any one connect or read
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, the port spelled out when it is the default."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:  # a port that is no number: matches no origin
        port = -1
    return scheme, (parts.hostname or "").lower(), port


def file_origin(api_base_url: str) -> str:
    """Where files are downloaded from for the Web API at `api_base_url`: Slack's file host
    when it is Slack; the API's own origin when something else speaks the Web API in
    Slack's place (`GALLEY_SLACK_API_URL`: a proxy, the tests' fake)."""
    scheme, host, port = _origin(api_base_url)
    if host == "slack.com" or host.endswith(".slack.com"):
        return SLACK_FILE_ORIGIN
    return f"{scheme}://{host}:{port}"


@dataclass(frozen=True)
class SlackFiles:
    """Downloads with the bot token, to `origin` only, within `max_bytes` and `deadline`."""

    token: str
    origin: str = SLACK_FILE_ORIGIN
    max_bytes: int = MAX_DOWNLOAD
    deadline: float = DOWNLOAD_DEADLINE  # seconds
    transport: httpx.BaseTransport | None = None  # httpx's default: tests record requests

    def download(self, file: dict[str, Any]) -> bytes | str:
        """The file's bytes, or why not in words (one line)."""
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        if not url:
            return "Slack gave no download link"
        size = str(file.get("size") or 0)
        if not size.isdigit() or int(size) > self.max_bytes:
            return self._too_large()
        if "@" in urlsplit(url).netloc or _origin(url) != _origin(self.origin):
            return f"not downloaded: its link is not Slack's file host ({urlsplit(url).netloc})"
        try:
            return self._read(url)
        except httpx.HTTPError as exc:
            return f"the download failed ({type(exc).__name__})"

    def _read(self, url: str) -> bytes | str:
        headers = {"Authorization": f"Bearer {self.token}", "Accept-Encoding": "identity"}
        timeout = httpx.Timeout(min(READ_TIMEOUT, self.deadline))
        deadline = time.monotonic() + self.deadline
        with (
            httpx.Client(transport=self.transport, timeout=timeout) as client,
            client.stream("GET", url, headers=headers, follow_redirects=False) as answer,
        ):
            if answer.is_redirect:  # the token is never sent on: the redirect is refused
                return "not downloaded: Slack answered with a redirect"
            if answer.status_code != 200:
                return f"Slack answered {answer.status_code}"
            if answer.headers.get("content-type", "").startswith("text/html"):
                return "Slack sent its sign-in page: the app needs the files:read scope"
            if answer.headers.get("content-encoding", "identity") != "identity":
                return "not downloaded: Slack sent it encoded"
            return self._bounded(answer, deadline)

    def _bounded(self, answer: httpx.Response, deadline: float) -> bytes | str:
        """The body on the wire, refused past `max_bytes` or the deadline."""
        length = answer.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            return self._too_large()
        chunks: list[bytes] = []
        count = 0
        for chunk in answer.iter_raw():
            count += len(chunk)
            if count > self.max_bytes:
                return self._too_large()
            if time.monotonic() > deadline:
                return f"the download took over {self.deadline:g} s"
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self) -> str:
        return f"it is over {self.max_bytes / (1024 * 1024):g} MB"
