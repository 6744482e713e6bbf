"""A recipe that publishes to several targets (docs/design.md §24): each target is its own
effect, performed once through the ledger; this module says what the targets' outcomes
come to for the run. It never sends anything, and never decides for one target by
another's outcome: a target that already succeeded is answered from its receipt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from core.errors import EffectNotSent, LookupUnavailable
from core.identity import (
    part_of_publish_key,
    platform_of_target,
    publish_effect_key,
    publish_part_key,
    target_of_publish_key,
)
from core.models import DraftRow, EffectRow
from core.policies import EffectOutcome, EffectStep, PublishOutcome
from core.ports import PostQuery, PublishedLink, Publisher
from core.post_body import BodyUnreadable
from core.publishing.lookup_proof import version_of
from core.publishing.threads import WHOLE_THREAD
from core.setup.config import Recipe
from core.states import EffectState
from core.store.receipts import Performed, Proof
from core.store.rows import lock_effect

PublisherFor = Callable[[Recipe], Publisher | Sequence[Publisher]]
"""A recipe's destinations: every target in the order the recipe lists them (the bot's
`Publishers`), or one publisher for a single-target recipe (tests' stand-ins)."""

SEPARATOR = "; "  # between targets in a run's detail and its published ids
PUBLIC_URL = "url"  # where a publication receipt's result keeps the post's public URL


def publishers_of(publisher_for: PublisherFor, recipe: Recipe) -> list[Publisher]:
    found = publisher_for(recipe)
    return list(found) if isinstance(found, Sequence) else [found]


@dataclass(frozen=True)
class TargetDone:
    """What `EffectLedger.perform` came to for one target of a run."""

    target: str
    performed: Performed

    @property
    def outcome(self) -> EffectOutcome:
        return self.performed.outcome

    @property
    def said(self) -> str:
        """The outcome in words, naming the target: what alerts and the run's events show."""
        return f"{self.target}: {self.performed.detail or self.outcome.value}"


@dataclass(frozen=True)
class Verdict:
    """What a publish pass came to for the whole run."""

    outcome: PublishOutcome
    detail: str | None = None
    refusal: EffectNotSent | None = None  # FAILED: the (first) refusal; `auth` if any was
    external_id: str | None = None  # PUBLISHED: every target's id, in order

    @property
    def auth(self) -> bool:
        return self.refusal is not None and self.refusal.auth


BUSY = (EffectOutcome.IN_PROGRESS, EffectOutcome.LEASE_LOST)
UNKNOWN = (EffectOutcome.UNCERTAIN, EffectOutcome.CANNOT_TELL)


def verdict(done: Sequence[TargetDone], *, stale: str) -> Verdict:
    """The run succeeds when every target has. Otherwise the most pressing outcome wins:
    a refused send (the run was cancelled, or its approval went stale: `stale`), then a
    destination's permanent refusal (the run fails: nobody re-sends it until a person
    retries), then an unknown outcome (people are asked), then a target another worker
    holds, then one waiting to be tried again. Each names its targets."""
    for stopped in (d for d in done if d.outcome == EffectOutcome.REFUSED):
        if stopped.performed.detail == stale:
            return Verdict(PublishOutcome.SENT_BACK, "approval too old")
        return Verdict(PublishOutcome.NOT_READY, stopped.performed.detail)
    refused = [d for d in done if _permanent(d.performed)]
    if refused:
        auth = next((d for d in refused if _refusal(d).auth), refused[0])
        return Verdict(PublishOutcome.FAILED, _said(refused), _refusal(auth))
    for outcomes, outcome in (
        (UNKNOWN, PublishOutcome.UNCERTAIN),
        (BUSY, PublishOutcome.IN_PROGRESS),
        ((EffectOutcome.WAITING, EffectOutcome.NOT_SENT), PublishOutcome.WAITING),
    ):
        matching = [d for d in done if d.outcome in outcomes]
        if matching:
            return Verdict(outcome, _said(matching))
    ids = SEPARATOR.join(d.performed.external_id or "" for d in done)
    return Verdict(PublishOutcome.PUBLISHED, external_id=ids)


def _permanent(performed: Performed) -> bool:
    refusal = performed.refusal
    return performed.outcome == EffectOutcome.NOT_SENT and bool(refusal and refusal.permanent)


def _refusal(done: TargetDone) -> EffectNotSent:
    assert done.performed.refusal is not None
    return done.performed.refusal


def _said(done: Sequence[TargetDone]) -> str:
    return SEPARATOR.join(d.said for d in done)


def public_url(result: str | dict[str, Any] | None) -> str | None:
    """The public URL a publication receipt holds (its `result`, stored JSON or read),
    if its destination has one."""
    if isinstance(result, str):
        try:
            result = json.loads(result)
        except ValueError:
            return None
    url = result.get(PUBLIC_URL) if isinstance(result, dict) else None
    return url if isinstance(url, str) else None


def published_links(session: Session, draft_keys: Sequence[str]) -> dict[str, list[PublishedLink]]:
    """Draft key -> where each of its targets published it (succeeded publish receipts
    that hold a public URL), in the order they were first tried (ix_effects_draft_key)."""
    if not draft_keys:
        return {}
    receipts = session.exec(
        select(EffectRow)
        .where(
            col(EffectRow.draft_key).in_(list(draft_keys)),
            col(EffectRow.step) == EffectStep.PUBLISH,
            col(EffectRow.state) == EffectState.SUCCEEDED,
        )
        .order_by(col(EffectRow.created_at), col(EffectRow.key))
    ).all()
    links: dict[str, list[PublishedLink]] = {}
    for receipt in receipts:
        url = public_url(receipt.result)
        if url is not None and part_of_publish_key(receipt.key) == 1:  # a thread: its first
            target = target_of_publish_key(receipt.key)
            links.setdefault(receipt.draft_key, []).append(PublishedLink(target, url))
    return links


def all_published(session: Session, recipe: Recipe, draft_key: str, proven: str = "") -> bool:
    """Every target of the recipe has a succeeded publish receipt for the draft (each
    locked, in target order), `proven` counting as one (its proof is being recorded), and
    so has every later part of a thread published part after part: only then is the draft
    `published` (docs/design.md §24, §31). A thread's first receipt whose one call sent the
    whole thread (`WHOLE_THREAD`) answers for all its parts; one without that mark (a
    person marked it published) needs its parts' receipts, or the next pass settles it."""
    receipts: list[tuple[str, EffectRow | None]] = []
    for key in receipt_keys(session, recipe, draft_key):
        if part_of_publish_key(key) > 1 and _whole_thread(receipts[-1][1]):
            receipts.append(receipts[-1])  # the first part's receipt answers for this one
            continue
        receipts.append((key, lock_effect(session, key)))
    return bool(receipts) and all(
        key == proven or (r is not None and r.state == EffectState.SUCCEEDED) for key, r in receipts
    )


def receipt_keys(session: Session, recipe: Recipe, draft_key: str) -> list[str]:
    """The publish effect key of each target of the recipe, in its order, each followed
    by its thread's later parts' keys (as many as the draft's version for it has)."""
    draft = session.get(DraftRow, draft_key)
    stored = "" if draft is None or draft.text is None else draft.text
    keys: list[str] = []
    for target in recipe.targets:
        parts = _parts(stored, target.target)
        keys += [publish_part_key(draft_key, target.target, n) for n in range(1, parts + 1)]
    return keys


def _parts(stored: str, target: str) -> int:
    try:
        return len(version_of(stored, target)[0])
    except BodyUnreadable:
        return 1


def _whole_thread(receipt: EffectRow | None) -> bool:
    if receipt is None or not receipt.result:
        return False
    try:
        return bool(json.loads(receipt.result).get(WHOLE_THREAD))
    except (ValueError, AttributeError):
        return False


REOPENED = "reopened by a retry"
"""The detail a person's retry of an uncertain publication leaves on its (failed) receipt:
its first send may have landed, so it counts as begun."""


def sends_begun(session: Session, draft_key: str) -> list[EffectRow]:
    """The draft's publish receipts whose send happened or may have: succeeded, in
    flight, uncertain, or reopened by a person's retry (ix_effects_draft_key). While any
    exists the draft's text is frozen: every target must carry the same text, and a
    look-up must find what was sent (docs/design.md §24, partial publication)."""
    receipts = session.exec(
        select(EffectRow).where(
            col(EffectRow.draft_key) == draft_key, col(EffectRow.step) == EffectStep.PUBLISH
        )
    ).all()
    return [r for r in receipts if r.state != EffectState.FAILED or _reopened(r)]


def _reopened(receipt: EffectRow) -> bool:
    return (receipt.detail or "").startswith(REOPENED)


def renamed_target(
    session: Session, draft_key: str, target: str, current: Sequence[str]
) -> str | None:
    """The id under which this draft was (or may have been) sent to a target of the same
    platform that the recipe no longer lists, when `target` has no receipt of its own: a
    handle changed to a DID, an instance's URL rewritten. The two may be one account, so
    nothing is sent under the new id and a person decides (docs/design.md §24)."""
    if session.get(EffectRow, publish_effect_key(draft_key, target)) is not None:
        return None  # its own receipt answers for it
    for receipt in sends_begun(session, draft_key):
        other = target_of_publish_key(receipt.key)
        if other not in current and platform_of_target(other) == platform_of_target(target):
            return other
    return None


def frozen_text(session: Session, draft_key: str) -> str | None:
    """Why the draft's text may not change now (Edit, Redraft), naming each target and
    what became of it; None while no send has begun."""
    begun = sends_begun(session, draft_key)
    if not begun:
        return None
    latest: dict[str, EffectRow] = {}  # a thread: each target by its furthest part begun
    for receipt in sorted(begun, key=lambda r: part_of_publish_key(r.key)):
        latest[target_of_publish_key(receipt.key)] = receipt
    said = ", ".join(f"{target} ({_what_became(r)})" for target, r in latest.items())
    return (
        f"Publishing has begun: {said}. The text cannot change now, or the targets would "
        "carry different posts; approve it as it is, or cancel the run."
    )


def _what_became(receipt: EffectRow) -> str:
    part = part_of_publish_key(receipt.key)
    what = _what_became_of_one(receipt)
    return f"part {part} {what}" if part > 1 else what


def _what_became_of_one(receipt: EffectRow) -> str:
    if receipt.state == EffectState.SUCCEEDED:
        return f"published as {receipt.external_id}"
    if receipt.state == EffectState.IN_FLIGHT:
        return "being sent"
    return "sent, outcome unknown"


def found_at(publisher: Publisher, query: PostQuery) -> Proof | None:
    """The destination's answer to "is it there?", as the ledger takes it. A post already
    the proof of another receipt is never this one's: a destination that answers with
    one (it matched by text and did not skip it) cannot tell, and a person decides."""
    external_id = publisher.lookup(query)
    if external_id is None:
        return None
    if query.taken(external_id):
        raise LookupUnavailable(
            f"{publisher.target} answered with {external_id}, already the proof of another "
            "publication: a person must check"
        )
    return proof_of(publisher, external_id, found=True)


def proof_of(publisher: Publisher, external_id: str, *, found: bool = False) -> Proof:
    """The receipt's proof of a publication: the destination's id and its public URL
    (`galley show`, the Home tab, the notebook and the review message read it there)."""
    result: dict[str, object] = {"found": True} if found else {}
    url = publisher.link(external_id)
    if url is not None:
        result[PUBLIC_URL] = url
    return Proof(external_id, result or None)
