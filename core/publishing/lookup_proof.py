"""A publish receipt's shape (its spec and payload), and what a destination's look-up may
take as the proof of one (docs/design.md
§24, look-up proof): a post made since the receipt's first send, by the database's clock
less `LOOKUP_SKEW`, with the text the receipt was sent with, and not already the proof of
another receipt to the same target. A recurring text (a weekly "We're hiring", two
recipes on one account) must never make one slot `succeeded` under another's post.

It only reads: the query it builds is asked of the destination by the ledger's look-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from sqlmodel import Session, col, select

from core.identity import (
    is_manual_proof,
    part_of_publish_key,
    payload_hash,
    publish_part_key,
    target_of_publish_key,
    text_hash,
)
from core.models import DraftRevisionRow, DraftRow, EffectRow
from core.policies import EffectStep
from core.ports import PostQuery, Publication, ThreadPlace
from core.post_body import BodyUnreadable, ImageRef, PostBody
from core.publishing.containers import recorded_containers
from core.setup.config import Recipe
from core.store.engine import Store
from core.store.receipts import EffectSpec

LOOKUP_SKEW = timedelta(minutes=5)
"""How far a destination's clock may lag the database's: a post stamped this long before
the receipt's first send may still be ours (Mastodon's ids and LinkedIn's `createdAt`
are the destination's own clock)."""


def publish_payload(
    effect_key: str, draft_key: str, parts: Sequence[str], images: Sequence[ImageRef] = ()
) -> dict[str, Any]:
    """The canonical payload of a publish receipt: its part's text by its hash and, for a
    thread or a post with images, every part and image of the target's version, so a key
    sent with another text anywhere in the thread is caught (docs/design.md §31). A single
    plain text keeps the payload every receipt had before threads existed."""
    part = part_of_publish_key(effect_key)
    payload: dict[str, Any] = {
        "target": target_of_publish_key(effect_key),
        "draft_key": draft_key,
        "text": text_hash(parts[part - 1]),
    }
    if part > 1:
        payload["part"] = part
    if len(parts) > 1:
        payload["thread"] = [text_hash(text) for text in parts]
    if images:
        payload["images"] = [[image.sha256, text_hash(image.alt)] for image in images]
    return payload


def stored_payload(effect_key: str, draft_key: str, stored: str) -> dict[str, Any] | None:
    """The payload a receipt would have had if sent from the draft text `stored` (None
    when that text has no such part for the key's target)."""
    try:
        parts, images = version_of(stored, target_of_publish_key(effect_key))
    except BodyUnreadable:
        return None
    if part_of_publish_key(effect_key) > len(parts):
        return None
    return publish_payload(effect_key, draft_key, parts, images)


def version_of(stored: str, target: str) -> tuple[tuple[str, ...], tuple[ImageRef, ...]]:
    """What `target` publishes of a draft's stored text: its parts and the images."""
    body = PostBody.parse(stored)
    return body.parts_for(target), body.images


def part_text(stored: str, effect_key: str) -> str:
    """The text of the part `effect_key` names, in a draft's stored text ("" if none)."""
    try:
        parts, _ = version_of(stored, target_of_publish_key(effect_key))
    except BodyUnreadable:
        return ""
    part = part_of_publish_key(effect_key)
    return parts[part - 1] if part <= len(parts) else ""


def publish_spec(recipe: Recipe, publication: Publication, run_id: str) -> EffectSpec:
    """The publish receipt of one target (or of one part of its thread): leased for four
    call limits, with the call's own limit as its on-the-wire grace, backing off between
    refused tries. `publication` is the target's whole version, under the part's key."""
    key, draft_key = publication.effect_key, publication.draft_key
    payload = publish_payload(key, draft_key, publication.parts, publication.images)
    return _spec(recipe, key, draft_key, payload, run_id)


def stored_spec(
    recipe: Recipe, effect_key: str, draft_key: str, stored: str, run_id: str
) -> EffectSpec:
    """The receipt `effect_key` as the draft text `stored` would have sent it (a send
    settled by look-up only: its run no longer publishes it)."""
    payload = stored_payload(effect_key, draft_key, stored) or {"unreadable": stored}
    return _spec(recipe, effect_key, draft_key, payload, run_id)


def _spec(
    recipe: Recipe, key: str, draft_key: str, payload: dict[str, Any], run_id: str
) -> EffectSpec:
    return EffectSpec(
        key,
        draft_key=draft_key,
        step=EffectStep.PUBLISH,
        payload=payload,
        lease=recipe.call_timeout * 4,
        run_id=run_id,
        backoff=True,
        on_wire=recipe.call_timeout,
    )


def sent_from(store: Store, effect_key: str) -> str | None:
    """The draft text the receipt `effect_key` was sent from, if the database has it."""
    with store.read() as session:
        receipt = session.get(EffectRow, effect_key)
        return None if receipt is None else sent_body(session, receipt)


def post_query(store: Store, effect_key: str, fallback: PostQuery) -> PostQuery:
    """The look-up for the receipt `effect_key` as the database knows it; `fallback` (the
    caller's own idea) while no receipt is written."""
    with store.read() as session:
        receipt = session.get(EffectRow, effect_key)
        if receipt is None:
            return fallback
        stored = sent_body(session, receipt)
        since = receipt.created_at
        place = fallback.reply_to or thread_place(session, receipt)
        containers = recorded_containers(session, effect_key)
    text = fallback.text if stored is None else part_text(stored, effect_key)
    return replace(
        fallback,
        text=text,
        since=since - LOOKUP_SKEW,
        taken=lambda found: proof_taken(store, found, effect_key),
        reply_to=place,
        containers=containers,
    )


NO_PROOF = "(no proof)"
"""The place of a part whose part before holds no post id: no post replies to it."""


def thread_place(session: Session, receipt: EffectRow) -> ThreadPlace | None:
    """Where a thread's later part was sent, read from the receipts of the part before and
    of the first part: a look-up takes only the reply to the part before, whoever asks
    (the publish pass, or the orphan pass after its run stopped). None for a first part."""
    part = part_of_publish_key(receipt.key)
    if part == 1:
        return None
    target = target_of_publish_key(receipt.key)
    before = session.get(EffectRow, publish_part_key(receipt.draft_key, target, part - 1))
    first = session.get(EffectRow, publish_part_key(receipt.draft_key, target, 1))
    return ThreadPlace(parent=_proof_of(before), root=_proof_of(first))


def _proof_of(receipt: EffectRow | None) -> str:
    found = None if receipt is None else receipt.external_id
    return found if found and not is_manual_proof(found) else NO_PROOF


def sent_body(session: Session, receipt: EffectRow) -> str | None:
    """The draft text a publish receipt was sent from: the draft's current text or one of
    its kept revisions, whichever the receipt's payload hash names. A draft edited after
    an uncertain send is looked up by what was sent, never by what it says now."""
    draft = session.get(DraftRow, receipt.draft_key)
    texts = [] if draft is None or draft.text is None else [draft.text]
    texts += session.exec(
        select(DraftRevisionRow.text)
        .where(col(DraftRevisionRow.draft_key) == receipt.draft_key)
        .order_by(col(DraftRevisionRow.revision).desc())
    ).all()
    for text in texts:
        payload = stored_payload(receipt.key, receipt.draft_key, text)
        if payload is not None and payload_hash(payload) == receipt.payload_hash:
            return text
    return None


def proof_taken(store: Store, external_id: str, effect_key: str) -> bool:
    """Whether a destination's post is already the proof of another publish receipt to
    the same target (ix_effects_external_id: one indexed read per candidate)."""
    target = target_of_publish_key(effect_key)
    with store.read_one() as session:
        holders = session.exec(
            select(EffectRow.key).where(
                col(EffectRow.external_id) == external_id,
                col(EffectRow.step) == EffectStep.PUBLISH,
                col(EffectRow.key) != effect_key,
            )
        ).all()
    return any(target_of_publish_key(key) == target for key in holders)
