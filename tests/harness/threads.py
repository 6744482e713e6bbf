"""Drafts whose approved text is a thread (docs/design.md §31), for the publishing tests:
the drafting side is not needed to publish one, so a drafted text is edited into a
`PostBody` of several parts and that revision approved, as a reviewer would."""

from __future__ import annotations

from core.post_body import EVERY_TARGET, PostBody
from core.review.queue import edit
from tests.harness.worlds import World

PARTS = (
    "1/4 What shipped this week, in four short parts.",
    "2/4 The scheduler now drafts ahead: https://example.com/ahead",
    "3/4 Reviewers can approve from their phones.",
    "4/4 Thanks to everyone who tried it. More next week.",
)


def thread_body(parts: tuple[str, ...] = PARTS, target: str = EVERY_TARGET) -> PostBody:
    return PostBody({target: parts})


def approved_thread(world: World, body: PostBody | None = None) -> str:
    """A drafted slot whose text is `body` (four parts for every target by default),
    approved: revision 2, the edit."""
    key = world.draft()
    text = (body or thread_body()).to_text()
    edited = edit(
        world.store,
        world.config,
        world.clock,
        draft_key=key,
        revision=1,
        text=text,
        user="U0EDITOR",
        permitted=True,
    )
    assert edited.accepted, edited
    assert world.approve(key, revision=2).accepted
    return key
