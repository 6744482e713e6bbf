"""A Slack file's bytes, downloaded with the bot token (docs/design.md §34) through the one
guarded client: the token goes only to Slack's file host, over https, and never to a
redirect; the read is bounded in bytes (on the wire and decoded) and in total time.

A file object's URL is found, not configured: whoever shared the file, or a forged event,
may name any host there. It must never carry the token anywhere but Slack's file host:
only once its origin is checked equal to that host (derived from the configured Slack API
URL) is it read, and then as configured.

Slack answers a download without a valid token with its sign-in page (200, HTML), never
an error: a download is taken only when Slack sent bytes that are not that page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from core.egress.way_out import Egress
from core.errors import NotFetched
from core.policies import FetchStop

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
    """Downloads with the bot token, to `origin` only, within `max_bytes` and `deadline`,
    through the one guarded client (`egress`; a test's simulates the network)."""

    token: str
    origin: str = SLACK_FILE_ORIGIN
    max_bytes: int = MAX_DOWNLOAD
    deadline: float = DOWNLOAD_DEADLINE  # seconds
    egress: Egress = field(default_factory=Egress)

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
        except NotFetched as refused:
            return self._not_fetched(refused)
        except httpx.HTTPError as exc:
            return f"the download failed ({type(exc).__name__})"

    def _read(self, url: str) -> bytes | str:
        """The bytes at `url`, already checked to be `origin`. The guarded client takes it
        as configured (its address rules do not apply): its origin equals the file host
        derived from the configured Slack API URL. The token is never sent on: a redirect
        is refused, not followed."""
        with self.egress.client(timeout=min(READ_TIMEOUT, self.deadline)) as client:
            answer = client.get(
                url,
                limit=self.max_bytes,
                deadline=self.deadline,
                configured=True,
                follow_redirects=False,
                headers={"Authorization": f"Bearer {self.token}"},
            )
        if answer.status != 200:
            return f"Slack answered {answer.status}"
        if answer.headers.get("content-type", "").startswith("text/html"):
            return "Slack sent its sign-in page: the app needs the files:read scope"
        return answer.body

    def _not_fetched(self, refused: NotFetched) -> str:
        """The guarded client's refusal in this download's words."""
        if refused.stop is FetchStop.REDIRECT:
            return "not downloaded: Slack answered with a redirect"
        if refused.stop is FetchStop.OVER_CAP:
            return self._too_large()
        if refused.stop is FetchStop.DEADLINE:
            return f"the download took over {self.deadline:g} s"
        return f"not downloaded: {refused.why}"

    def _too_large(self) -> str:
        return f"it is over {self.max_bytes / (1024 * 1024):g} MB"
