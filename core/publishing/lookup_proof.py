"""A publish receipt's shape (its spec and payload), and what a destination's look-up may
take as the proof of one (docs/design.md
§24, look-up proof): a post made since the receipt's first send, by the database's clock
less `LOOKUP_SKEW`, with the text the receipt was sent with, and not already the proof of
another receipt to the same target. A recurring text (a weekly "We're hiring", two
recipes on one account) must never make one slot `succeeded` under another's post.

It only reads: the query it builds is asked of the destination by the ledger's look-up.
"""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import Session, col, select

from core.identity import payload_hash, publish_effect_key, target_of_publish_key, text_hash
from core.models import DraftRevisionRow, DraftRow, EffectRow
from core.policies import EffectStep
from core.ports import PostQuery
from core.setup.config import Recipe
from core.store.effects import EffectSpec
from core.store.engine import Store

LOOKUP_SKEW = timedelta(minutes=5)
"""How far a destination's clock may lag the database's: a post stamped this long before
the receipt's first send may still be ours (Mastodon's ids and LinkedIn's `createdAt`
are the destination's own clock)."""


def publish_payload(target: str, draft_key: str, text: str) -> dict[str, str]:
    """The canonical payload of a publish receipt: the text by its hash."""
    return {"target": target, "draft_key": draft_key, "text": text_hash(text)}


def publish_spec(recipe: Recipe, target: str, draft_key: str, text: str, run_id: str) -> EffectSpec:
    """The publish receipt of one target: leased for four call limits, with the call's own
    limit as its on-the-wire grace, backing off between refused tries."""
    return EffectSpec(
        publish_effect_key(draft_key, target),
        draft_key=draft_key,
        step=EffectStep.PUBLISH,
        payload=publish_payload(target, draft_key, text),
        lease=recipe.call_timeout * 4,
        run_id=run_id,
        backoff=True,
        on_wire=recipe.call_timeout,
    )


def post_query(store: Store, effect_key: str, fallback: PostQuery) -> PostQuery:
    """The look-up for the receipt `effect_key` as the database knows it; `fallback` (the
    caller's own idea) while no receipt is written."""
    with store.read() as session:
        receipt = session.get(EffectRow, effect_key)
        if receipt is None:
            return fallback
        text = sent_text(session, receipt) or fallback.text
        since = receipt.created_at
    return PostQuery(
        effect_key,
        text,
        since - LOOKUP_SKEW,
        taken=lambda found: proof_taken(store, found, effect_key),
    )


def sent_text(session: Session, receipt: EffectRow) -> str | None:
    """The text a publish receipt was sent with: the draft's current text or one of its
    kept revisions, whichever the receipt's payload hash names. A draft edited after an
    uncertain send is looked up by what was sent, never by what it says now."""
    target = target_of_publish_key(receipt.key)
    draft = session.get(DraftRow, receipt.draft_key)
    texts = [] if draft is None or draft.text is None else [draft.text]
    texts += session.exec(
        select(DraftRevisionRow.text)
        .where(col(DraftRevisionRow.draft_key) == receipt.draft_key)
        .order_by(col(DraftRevisionRow.revision).desc())
    ).all()
    for text in texts:
        if payload_hash(publish_payload(target, receipt.draft_key, text)) == receipt.payload_hash:
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
