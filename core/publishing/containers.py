"""Threads' two steps (docs/design.md §24): a media container is made, its id kept on a
receipt of its own, and only then is it published by the publish receipt's one send.

The container is its own effect, keyed by the publish receipt it serves. Making one is
harmless (it is never seen until published, and expires unpublished after a day), so it
is repeatable as an image upload is: its answer lost, another is made under the same key
and only the receipt's one id is ever published. Every retry of the send reads the
container from its receipt and publishes that one, so a crash between the steps never
makes a second container that is published too. A container that expired (or failed)
unpublished is made again under a renewed key; one made for another text (the draft was
edited after a failed send) is never published: a new one is made.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlmodel import Session

from core.errors import EffectNotSent, KeyPayloadConflict
from core.identity import container_effect_key, text_hash
from core.models import EffectRow
from core.policies import ContainerStatus, EffectOutcome, EffectStep
from core.ports import ContainerPublisher, Publication
from core.states import EffectState
from core.store.effects import EffectLedger
from core.store.receipts import EffectSpec, Proof

MAX_CONTAINERS = 5  # containers made for one send before a person is asked to look
MADE = frozenset({EffectOutcome.SENT, EffectOutcome.DONE, EffectOutcome.FOUND})
IN_PROGRESS_WAIT = 60.0  # Threads: ask a container's status about once a minute


REMADE = frozenset({ContainerStatus.EXPIRED, ContainerStatus.ERROR})


def with_container(
    ledger: EffectLedger,
    publisher: ContainerPublisher,
    publication: Publication,
    *,
    run_id: str,
    call_timeout: timedelta,
) -> Publication:
    """`publication` with the container its send publishes: the receipt's own while it
    can still be published, else a new one, made once; EffectNotSent while there is none."""
    wanted = _made_for(publication)
    for renewal in range(1, MAX_CONTAINERS + 1):
        key = container_effect_key(publication.effect_key, renewal)
        receipt = ledger.get(key)
        if receipt is not None and receipt.state == EffectState.SUCCEEDED:
            if (receipt.result or {}).get("made_for") != wanted:
                continue  # made for another text: never published
            container = receipt.external_id or ""
            status = publisher.container_status(container)
            if status in REMADE:
                continue
            return replace(publication, container=_usable(container, status))
        spec = EffectSpec(
            key,
            draft_key=publication.draft_key,
            step=EffectStep.CONTAINER,
            payload={"publish": publication.effect_key, "made_for": wanted},
            lease=call_timeout * 4,
            run_id=run_id,
            backoff=True,
            on_wire=call_timeout,
        )

        def make() -> Proof:
            return Proof(publisher.create_container(publication), {"made_for": wanted})

        try:
            performed = ledger.perform(spec, make, repeatable=True)
        except KeyPayloadConflict:
            continue  # a receipt of another text, still open: never this one's container
        if performed.outcome not in MADE or performed.receipt is None:
            raise _not_made(performed.detail or performed.outcome.value, performed.refusal)
        return replace(publication, container=performed.receipt.external_id)
    raise EffectNotSent(
        f"{MAX_CONTAINERS} Threads containers were made for this post and none could be "
        "published: a person must check",
        permanent=True,
    )


def recorded_containers(session: Session, publish_key: str) -> tuple[str, ...]:
    """The containers made for the publish receipt `publish_key`, newest first: what a
    look-up asks Threads about."""
    found: list[str] = []
    for renewal in range(1, MAX_CONTAINERS + 1):
        row = session.get(EffectRow, container_effect_key(publish_key, renewal))
        if row is None:
            break
        if row.external_id:
            found.append(row.external_id)
    return tuple(reversed(found))


def _made_for(publication: Publication) -> str:
    """What a container holds: the part's text and the post it replies to."""
    parent = "" if publication.reply_to is None else publication.reply_to.parent
    return text_hash(f"{parent}\n{publication.text}")


def _usable(container: str, status: ContainerStatus) -> str:
    if status == ContainerStatus.IN_PROGRESS:
        raise EffectNotSent(
            f"Threads container {container} is still being made", retry_after=IN_PROGRESS_WAIT
        )
    if status == ContainerStatus.PUBLISHED:  # the look-up could not find its post: no resend
        raise EffectNotSent(
            f"Threads container {container} is already published, but its post was not "
            "found in the account's threads: a person must check",
            permanent=True,
        )
    return container


def _not_made(said: str, refusal: EffectNotSent | None) -> EffectNotSent:
    """The post waits for its container: refused for good when Threads refused it."""
    message = f"Threads container not made: {said}"
    if refusal is None:
        return EffectNotSent(message)
    return EffectNotSent(
        message, permanent=refusal.permanent, auth=refusal.auth, retry_after=refusal.retry_after
    )
