"""A target's version of a draft (`shaped_for`), and a thread published part after part
(docs/design.md §31): every part its own effect, under its own key, sent once and replying
to the part before; the whole thread in one call where the destination takes it so
(Bluesky). It never sends anything itself: each part goes through the caller's
`publish_one` (`target_send.TargetPublisher.publish_one`: the ledger's post-once sequence).

A crash or a lost answer mid-thread resumes at the first part without proof: the parts
before it answer from their receipts, and the place of the next one is read from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from core.errors import EffectNotSent
from core.identity import is_manual_proof, publish_part_key, target_of_publish_key
from core.policies import EffectOutcome, ThreadStyle
from core.ports import Publication, Publisher, ThreadPlace, ThreadPublisher
from core.post_body import PostBody
from core.store.receipts import Performed, Proof

WHOLE_THREAD = "whole_thread"
"""Kept in the result of a receipt whose one call published a whole thread (Bluesky): its
proof is every part's, and no part receipt follows it (`targets.all_published`)."""

PublishOne = Callable[[Publication, Publication], Performed]
"""One effect performed once: (the target's whole version under the part's key, for the
receipt's payload; what is sent), and what the ledger came to."""


def thread_style(publisher: Publisher) -> ThreadStyle | None:
    """How `publisher` publishes a thread; None when it takes none."""
    return publisher.thread_style if isinstance(publisher, ThreadPublisher) else None


def proof_of_version(
    proof: Proof | None, publisher: Publisher, version: Publication
) -> Proof | None:
    """`proof` marked as the proof of a whole thread when one call sent it all."""
    if proof is None or not version.replies or thread_style(publisher) != ThreadStyle.ONE_CALL:
        return proof
    return replace(proof, result={**(proof.result or {}), WHOLE_THREAD: True})


def shaped_for(approved: Publication, target: str) -> Publication:
    """The approved draft as `target` publishes it: its own version of the body (or the
    one for every target), split into the first part and the thread's replies, with the
    body's images (docs/design.md §30, §31 and §32). A plain draft comes out as it went in."""
    body = PostBody.parse(approved.text)
    first, *replies = body.parts_for(target)
    return replace(approved, text=first, replies=tuple(replies), images=body.images)


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
        return refused_for_good(said)  # never split into unrelated posts
    return _part_by_part(version, publish_one)


def _part_by_part(version: Publication, publish_one: PublishOne) -> Performed:
    first = publish_one(version, replace(version, replies=(), reply_to=None))
    if not first.happened or first.external_id is None:
        return first
    parent = first.external_id
    target = target_of_publish_key(version.effect_key)
    for number, text in enumerate(version.replies, start=2):
        if is_manual_proof(parent):
            return _no_place(number)
        key = publish_part_key(version.draft_key, target, number)
        place = ThreadPlace(parent=parent, root=first.external_id)
        sent = replace(version, effect_key=key, text=text, replies=(), images=(), reply_to=place)
        done = publish_one(replace(version, effect_key=key), sent)
        if not done.happened or done.external_id is None:
            return replace(done, detail=f"part {number}: {done.detail or done.outcome.value}")
        parent = done.external_id
    return first


def _no_place(number: int) -> Performed:
    """A part whose part before was marked published by a person has nothing to reply to:
    no post id is known. It is never posted outside the thread; the run fails, saying so."""
    said = (
        f"part {number} cannot be published: part {number - 1} was marked published by a "
        "person, without its post's id, so there is nothing to reply to; check the thread"
    )
    return refused_for_good(said)


def refused_for_good(said: str) -> Performed:
    """Refused for good: retrying cannot help (a target that can never take this draft
    as it is); the run fails and people decide."""
    refusal = EffectNotSent(said, permanent=True)
    return Performed(EffectOutcome.NOT_SENT, detail=said, refusal=refusal)
