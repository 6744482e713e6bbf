"""Where a listener's answer goes: to the clicker only, in the thread of the message they
clicked, which stays as it is; to one person in a channel; to the person who dropped an
image, in that thread; and what they are told when a listener failed outright. Slack
calls only, no core operation.
"""

from __future__ import annotations

from collections.abc import Callable

from slack_bolt import Respond
from slack_sdk import WebClient


def last_resort_reply(error: Exception) -> str:
    """What a person is told when their click or command failed unexpectedly."""
    return (
        f"Galley could not finish that: {error}. It is in the bot's log; "
        "the review message and `/galley status` show where things stand."
    )


def ephemeral(client: WebClient, channel: str, user: str, text: str) -> None:
    client.chat_postEphemeral(channel=channel, user=user, text=text)


def ephemeral_in_thread(
    client: WebClient, channel: str, thread_ts: str, user: str
) -> Callable[[str], object]:
    """An answer only `user` sees, in the thread they dropped an image into."""
    return lambda text: client.chat_postEphemeral(
        channel=channel, user=user, thread_ts=thread_ts, text=text
    )


def in_thread(respond: Respond) -> Callable[[str], object]:
    """An answer only the clicker sees, leaving the message they clicked as it is."""
    return lambda text: respond(text, response_type="ephemeral", replace_original=False)
