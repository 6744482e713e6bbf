"""Images a reviewer drops into a review message's thread (docs/design.md §32): each
image file of the message downloaded with the bot's token (`files:read`,
`bot/slack_files.py`) and added to the thread's draft through core
(`core/api/draft_images.py`), which shapes it for the recipe's targets and writes the next
revision. Files that are no image are left alone.

A drop by someone who may not edit the draft is refused before anything is downloaded,
decoded or stored (docs/design.md §34).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.mrkdwn import escape_mrkdwn
from bot.slack_files import SlackFiles
from core.api.draft_images import DraftImages
from core.policies import ImageSource
from core.review.alt_text import AltTextProposer
from core.review.queue import ReviewAnswer


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
    def alt(self) -> str:
        """The description the person gave the file in Slack (`alt_txt`), or ""."""
        return str(self.file.get("alt_txt") or "").strip()

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
    files: SlackFiles,
    tell: Callable[[str], object],
    alt_texts: AltTextProposer | None = None,
) -> ReviewAnswer | None:
    """The dropped image downloaded and added to its draft with the alt text the person
    gave the file in Slack, else one proposed by the model (`alt_texts`); what happened
    told in the thread. The answer of the last revision written; None when it was refused
    or could not be downloaded.
    `tell` is given mrkdwn: the file's name and what its link named are made inert."""

    def say(plain: str) -> None:
        tell(escape_mrkdwn(plain))

    refused = images.refused_drop(drop.user, drop.draft_key)
    if refused is not None:  # before the download: nothing fetched, decoded or stored
        say(f"Image {drop.name} was not added: {refused}")
        return None
    data = files.download(drop.file)
    if isinstance(data, str):
        say(f"Image {drop.name} was not added: {data}.")
        return None
    answer, taken = images.add(
        drop.draft_key, data, drop.name, ImageSource.SLACK_FILE, user=drop.user, alt=drop.alt
    )
    if answer.accepted and taken is not None:
        shaped = f" ({taken.changed})" if taken.changed else ""
        if taken.ref.alt:  # the person's description wins: no model call
            say(f"Image {drop.name} added{shaped}, with the alt text you gave it.")
            return answer
        say(f"Image {drop.name} added{shaped}. Add its alt text with Edit before approving.")
        if alt_texts is not None:
            proposal = alt_texts.propose(drop.draft_key, taken.ref, drop.context)
            if proposal.told:
                say(proposal.told)
            return proposal.answer or answer
    return answer
