"""A thread published part after part (docs/design.md §31): every part its own effect,
under its own key, sent once and replying to the part before; the whole thread in one
call where the destination takes it so (Bluesky). It never sends anything itself: each
part goes through the caller's `publish_one` (the ledger's post-once sequence).

A crash or a lost answer mid-thread resumes at the first part without proof: the parts
before it answer from their receipts, and the place of the next one is read from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from core.errors import EffectNotSent
from core.identity import publish_part_key, target_of_publish_key
from core.policies import EffectOutcome, ThreadStyle
from core.ports import Publication, Publisher, ThreadPlace, ThreadPublisher
from core.store.effects import Performed

PublishOne = Callable[[Publication, Publication], Performed]
"""One effect performed once: (the target's whole version under the part's key, for the
receipt's payload; what is sent), and what the ledger came to."""


def thread_style(publisher: Publisher) -> ThreadStyle | None:
    """How `publisher` publishes a thread; None when it takes none."""
    return publisher.thread_style if isinstance(publisher, ThreadPublisher) else None


def publish_version(
    publisher: Publisher, version: Publication, publish_one: PublishOne
) -> Performed:
    """A target's version: one effect for a single post or a thread sent in one call,
    else part after part, stopping at the first part that did not happen (its outcome is
    the target's: uncertain, waiting, refused). All parts done: the first part's outcome,
    whose id is the thread's."""
    if not version.replies:
        return publish_one(version, version)
    style = thread_style(publisher)
    if style == ThreadStyle.ONE_CALL:
        return publish_one(version, version)
    if style is None:
        parts = len(version.parts)
        said = f"{publisher.target} does not publish threads: this version has {parts} parts"
        refusal = EffectNotSent(said, permanent=True)  # never split into unrelated posts
        return Performed(EffectOutcome.NOT_SENT, detail=said, refusal=refusal)
    return _part_by_part(version, publish_one)


def _part_by_part(version: Publication, publish_one: PublishOne) -> Performed:
    first = publish_one(version, replace(version, replies=(), reply_to=None))
    if not first.happened or first.external_id is None:
        return first
    parent = first.external_id
    target = target_of_publish_key(version.effect_key)
    for number, text in enumerate(version.replies, start=2):
        key = publish_part_key(version.draft_key, target, number)
        place = ThreadPlace(parent=parent, root=first.external_id)
        sent = replace(version, effect_key=key, text=text, replies=(), images=(), reply_to=place)
        done = publish_one(replace(version, effect_key=key), sent)
        if not done.happened or done.external_id is None:
            return replace(done, detail=f"part {number}: {done.detail or done.outcome.value}")
        parent = done.external_id
    return first
