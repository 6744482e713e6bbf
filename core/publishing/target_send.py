"""One target's send under its receipt (docs/design.md §7-§10): the post, or one part of its
thread, looked up first and sent at most once, its images uploaded and its link card made
just before, the last look under the fence. Never sends without the ledger's receipt.

`TargetPublisher` is one target of one run; each `TargetSend` it makes is one effect, whose
steps the ledger's `perform` calls in its post-once order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlmodel import Session

from core.drafting.revisions import renumber_revision
from core.egress.way_out import Egress
from core.errors import KeyPayloadConflict
from core.failpoints import Failpoint, failpoint
from core.identity import run_of_draft_key
from core.images.library import ImageLibrary
from core.images.uploads import ImageUploads, image_bytes
from core.models import DraftRow, RunRow
from core.ports import (
    AttachmentTaker,
    Clock,
    ContainerPublisher,
    ImageUploader,
    LinkCardTaker,
    PostQuery,
    Publication,
    Publisher,
    SendMarker,
)
from core.publishing.containers import with_container
from core.publishing.link_cards import card_for, with_card_note
from core.publishing.lookup_proof import post_query, publish_spec
from core.publishing.targets import found_at, proof_of
from core.publishing.threads import proof_of_version, refused_for_good
from core.setup.config import Config, Recipe
from core.slots.publish_time import approval_stale
from core.states import DraftState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.leases import PUBLISHER, lease_now
from core.store.receipts import Performed, Proof
from core.store.rows import lock_draft, lock_run, required, run_holds
from core.store.transitions import move_draft, move_run

NOT_SENT_CANCELLED = "the run was cancelled before it was sent"
NOT_SENT_STALE = "approval went stale before it was sent"


@dataclass(frozen=True)
class TargetPublisher:
    """One target of one run, with what its sends need: `publish_one` is what
    `threads.publish_version` calls for the post, or for each part of its thread."""

    store: Store
    config: Config
    clock: Clock
    ledger: EffectLedger
    recipe: Recipe
    publisher: Publisher
    run_id: str

    def publish_one(self, version: Publication, publication: Publication) -> Performed:
        """One effect: `publication` is what is sent, `version` the target's whole version
        under its key, for the receipt's payload."""
        return TargetSend(self, version, publication).perform()


class TargetSend:
    """One effect of a target, looked up first, sent at most once; its receipt keeps the
    public URL. What `prepare` produced (`shaped`) is what `act` sends."""

    def __init__(self, target: TargetPublisher, version: Publication, publication: Publication):
        self.target, self.version, self.publication = target, version, publication
        self.publisher = target.publisher
        self.shaped = publication  # with its uploaded images or card once `prepare` ran

    def perform(self) -> Performed:
        """The ledger's post-once sequence over this send's steps; a key already sent with
        another text is never sent again, and people are told."""
        spec = publish_spec(self.target.recipe, self.version, self.target.run_id)
        if isinstance(self.publisher, SendMarker) and self.publisher.marks_send:
            spec = replace(spec, marks_send=True)  # no look-up: the receipt marks the send
        try:
            return self.target.ledger.perform(
                spec,
                self.act,
                lookup=self.lookup,
                may_act=self.may_act,
                look_first=True,  # a restored database has no receipt: the destination knows
                prepare=self.prepare,
                before_call=self.before_call,
            )
        except KeyPayloadConflict as exc:  # sent with another text: never sent again; told
            said = f"{self.publisher.target} was sent another text of this draft: {exc}"
            return refused_for_good(said)

    def prepare(self) -> None:
        """Each upload its own effect; the post's fence is passed again after it."""
        self.shaped = self._with_media()
        if isinstance(self.publisher, ContainerPublisher):  # Threads: the first of two steps
            timeout = self.target.recipe.call_timeout
            self.shaped = with_container(
                self.target.ledger,
                self.publisher,
                self.shaped,
                run_id=self.target.run_id,
                call_timeout=timeout,
            )

    def before_call(self) -> None:
        failpoint(Failpoint.BEFORE_PUBLISH_CALL)

    def act(self) -> Proof:
        external_id = self.publisher.publish(self.shaped)
        failpoint(Failpoint.AFTER_PUBLISH_CALL)  # sent, not yet recorded: the lookup must find it
        sent = with_card_note(proof_of(self.publisher, external_id), self.shaped.card)
        proof = proof_of_version(sent, self.publisher, self.publication)
        assert proof is not None
        return proof

    def lookup(self) -> Proof | None:
        found = found_at(self.publisher, self._query())
        return proof_of_version(found, self.publisher, self.publication)

    def may_act(self, session: Session, _now: datetime) -> str | None:
        """The last look before a send, under its receipt: the run still publishes this
        draft, the draft is still approved, and the approval is still fresh (a stale one
        sends the draft back to review, in this same transaction)."""
        run_id, clock = self.target.run_id, self.target.clock
        run = required(lock_run(session, run_id), f"run {run_id}")
        draft = required(lock_draft(session, self.publication.draft_key), "draft")
        sending = (RunState.PUBLISHING, RunState.UNCERTAIN)
        if run.state not in sending:
            if run.state == RunState.CANCELLED and draft.state == DraftState.APPROVED:
                move_draft(session, draft, DraftState.CANCELLED, actor=PUBLISHER, at=clock.now())
            return NOT_SENT_CANCELLED
        holds = any(run_holds(run, draft.key, state) for state in sending)
        if not holds or draft.state != DraftState.APPROVED:
            return f"{draft.key} is {draft.state}: its run no longer publishes it"
        now = lease_now(session, clock)  # after the locks, the database's clock
        recipe = self.target.recipe
        if approval_stale(recipe, draft.decided_at, run.publish_at, now):
            # A new send needs a fresh approval, even for a run resolved days later.
            send_back(session, run, draft, recipe.approval_ttl, now)
            return NOT_SENT_STALE
        return None

    def _query(self) -> PostQuery:
        """The look-up of this target's receipt: what it was sent with, since when."""
        publication = self.publication
        fallback = PostQuery(
            publication.effect_key,
            publication.text,
            publication.approved_at,
            reply_to=publication.reply_to,
        )
        return post_query(self.target.store, publication.effect_key, fallback)

    def _with_media(self) -> Publication:
        """The publication with its images as the target holds them, each uploaded once,
        or its link card (docs/design.md §32); a target that takes no bytes (a webhook)
        gets the references, a target that sends them inside the post (Discord) their
        bytes."""
        target, publisher, publication = self.target, self.publisher, self.publication
        if isinstance(publisher, AttachmentTaker) and publisher.takes_attachments:
            library = ImageLibrary(target.store, target.clock)
            attached = tuple(image_bytes(library, image) for image in publication.images)
            return replace(publication, attachments=attached)
        if not isinstance(publisher, ImageUploader):
            return publication
        library = ImageLibrary(target.store, target.clock)
        uploads = ImageUploads(target.ledger, library)
        run_id = run_of_draft_key(publication.draft_key)
        timeout = target.recipe.call_timeout
        if publication.images:
            media = uploads.upload_all(
                publisher,
                publisher.target,
                publication.draft_key,
                publication.images,
                run_id=run_id,
                call_timeout=timeout,
            )
            failpoint(Failpoint.AFTER_IMAGE_UPLOADS)
            return replace(publication, media=media)
        if isinstance(publisher, LinkCardTaker) and publisher.takes_link_cards:
            card = card_for(
                publication,
                publisher,
                publisher.target,
                library,
                uploads,
                run_id=run_id,
                call_timeout=timeout,
                egress=Egress(target.config.egress),
            )
            return replace(publication, card=card)
        return publication


def send_back(
    session: Session, run: RunRow, draft: DraftRow, ttl: timedelta, now: datetime
) -> None:
    """A stale approval is not revived: the draft is reviewed again, as a new revision so
    that buttons on the old message stop counting."""
    why = f"approval older than approval_ttl ({ttl}) when publishing started"
    renumber_revision(session, draft, at=now)  # the same text, its author kept
    draft.decided_by = draft.decided_at = None
    draft.decision_reason = (
        f"Back for review: the approval was older than {ttl} when publishing started."
    )
    draft.ready_at = now  # a full review window again, from now
    move_draft(session, draft, DraftState.READY, actor=PUBLISHER, at=now, reason=why)
    move_run(session, run, RunState.AWAITING_REVIEW, actor=PUBLISHER, at=now, detail=why)
