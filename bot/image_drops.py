"""Images a reviewer drops into a review message's thread (docs/design.md §32): each
image file of the message downloaded with the bot's token (`files:read`) and added to the
thread's draft through core (`core/api/draft_images.py`), which shapes it for the
recipe's targets and writes the next revision. Files that are no image are left alone.

Slack answers a download without a valid token with its sign-in page (200, HTML), never
an error: a download is taken only when Slack sent bytes that are not that page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from core.api.draft_images import DraftImages
from core.policies import ImageSource
from core.review.alt_text import AltTextProposer
from core.review.queue import ReviewAnswer

MAX_DOWNLOAD = 50 * 1024 * 1024  # bytes: larger files are refused before downloading
DOWNLOAD_TIMEOUT = 30.0  # seconds


@dataclass(frozen=True)
class Drop:
    """One image file shared in a review thread, and whom to tell."""

    draft_key: str
    user: str
    channel: str
    thread_ts: str
    file: dict[str, Any]
    words: str = ""  # the message's own text: context for the proposed alt text

    @property
    def name(self) -> str:
        return str(self.file.get("name") or self.file.get("id") or "image")

    @property
    def context(self) -> str:
        """What the alt text's model is told of the image: its name, and the reviewer's
        words when they wrote any (no "the reviewer wrote:" followed by nothing)."""
        words = self.words.strip()
        return f"a file named {self.name}" + (f"; the reviewer wrote: {words}" if words else "")


def drops_in(event: dict[str, Any], review_channel: str, images: DraftImages) -> list[Drop]:
    """The image files of a message posted in a review message's thread, by a person."""
    thread_ts = event.get("thread_ts")
    if event.get("channel") != review_channel or not thread_ts or event.get("bot_id"):
        return []
    files = [f for f in event.get("files") or [] if str(f.get("mimetype", "")).startswith("image/")]
    if not files:
        return []
    draft_key = images.draft_of_review_message(str(thread_ts))
    if draft_key is None:
        return []
    user, words = str(event.get("user", "")), str(event.get("text") or "")
    return [Drop(draft_key, user, review_channel, str(thread_ts), f, words) for f in files]


def take_drop(
    drop: Drop,
    images: DraftImages,
    token: str,
    tell: Callable[[str], object],
    alt_texts: AltTextProposer | None = None,
) -> ReviewAnswer | None:
    """The dropped image downloaded and added to its draft, its alt text proposed by the
    model when it has none (`alt_texts`); what happened told in the thread. The answer of
    the last revision written; None when it could not be downloaded."""
    data = download(drop.file, token)
    if isinstance(data, str):
        tell(f"Image {drop.name} was not added: {data}.")
        return None
    answer, taken = images.add(
        drop.draft_key, data, drop.name, ImageSource.SLACK_FILE, user=drop.user
    )
    if answer.accepted and taken is not None:
        shaped = f" ({taken.changed})" if taken.changed else ""
        tell(f"Image {drop.name} added{shaped}. Add its alt text with Edit before approving.")
        if alt_texts is not None and not taken.ref.alt:
            proposal = alt_texts.propose(drop.draft_key, taken.ref, drop.context)
            if proposal.told:
                tell(proposal.told)
            return proposal.answer or answer
    return answer


def download(file: dict[str, Any], token: str) -> bytes | str:
    """The file's bytes, or why not in words."""
    url = file.get("url_private_download") or file.get("url_private")
    if not url:
        return "Slack gave no download link"
    if int(file.get("size") or 0) > MAX_DOWNLOAD:
        return f"it is over {MAX_DOWNLOAD // (1024 * 1024)} MB"
    try:
        answer = httpx.get(
            str(url),
            headers={"Authorization": f"Bearer {token}"},
            follow_redirects=True,
            timeout=DOWNLOAD_TIMEOUT,
        )
    except httpx.HTTPError as exc:
        return f"the download failed ({type(exc).__name__})"
    if answer.status_code != 200:
        return f"Slack answered {answer.status_code}"
    if answer.headers.get("content-type", "").startswith("text/html"):
        return "Slack sent its sign-in page: the app needs the files:read scope"
    return answer.content
