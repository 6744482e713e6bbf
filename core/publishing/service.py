"""Publishing an approved draft exactly once (docs/design.md §7-§10).

Every publication is an effect with a receipt. The destination is asked before
publishing and before any retry of an uncertain attempt: found → record it, done;
clearly absent → publish once, under the same key; cannot tell → the run becomes
`uncertain` and people are asked. An approval older than `approval_ttl` when
publishing starts is not used: the draft goes back to review. The receipt's lease is
kept alive by heartbeat for as long as the call runs (429 waits included), so no other
pass takes a slow send for a dead one; a run cancelled before the send stops it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar

from sqlmodel import Session

from core.drafting.revisions import renumber_revision
from core.egress.way_out import Egress
from core.errors import (
    ConcurrentChange,
    EffectNotSent,
    GalleyError,
    KeyPayloadConflict,
)
from core.failpoints import Failpoint, failpoint
from core.identity import publish_effect_key, run_of_draft_key
from core.images.library import ImageLibrary
from core.images.uploads import ImageUploads, image_bytes
from core.models import DraftRow, RunRow
from core.policies import EffectOutcome, FailReason, PublishOutcome
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
from core.post_body import PostBody
from core.publishing.containers import with_container
from core.publishing.link_cards import card_for, with_card_note
from core.publishing.lookup_proof import post_query, publish_spec
from core.publishing.lost_answers import look_up_due, lookup_grace
from core.publishing.missed_slots import miss_its_time
from core.publishing.orphans import OrphanSettler, note_outcome
from core.publishing.queue import PUBLISHABLE, OrphanedSend, orphaned_sends, publishable
from core.publishing.results import PublishResult
from core.publishing.targets import (
    PublisherFor,
    TargetDone,
    Verdict,
    found_at,
    proof_of,
    publishers_of,
    renamed_target,
    verdict,
)
from core.publishing.threads import proof_of_version, publish_version
from core.setup.config import Config, Recipe
from core.setup.durations import format_duration
from core.slots.publish_time import approval_stale, not_yet
from core.states import DraftState, RunState, run_may_move
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.leases import PUBLISHER, lease_now
from core.store.receipts import Performed, Proof
from core.store.rows import lock_draft, lock_draft_of, lock_run, required, run_holds, run_row
from core.store.transitions import move_draft, move_run

log = logging.getLogger(__name__)

NOT_SENT_CANCELLED = "the run was cancelled before it was sent"
NOT_SENT_STALE = "approval went stale before it was sent"


Subject = TypeVar("Subject")


class PublishingService:
    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock,
        ledger: EffectLedger,
        publisher_for: PublisherFor,
        alert: Callable[[str], object] | None = None,
    ) -> None:
        """`alert(run_id)` is called when people must look: uncertain, or refused auth."""
        self.store, self.config, self.clock, self.ledger = store, config, clock, ledger
        self.publisher_for = publisher_for
        self.alert = alert or (lambda run_id: None)

    def publishable_runs(self) -> list[str]:
        """One batch of approved, publishing and uncertain runs that have a destination."""
        with self.store.read() as session:  # the database's clock: replicas' clocks drift
            rows = publishable(session, lease_now(session, self.clock))
        return [run_id for run_id, recipe in rows if self._target(recipe) is not None]

    def publish_pending(self) -> list[PublishResult]:
        """The reconciler's pass: every approved, publishing or uncertain run, once, then
        the sends whose run stopped publishing them before their outcome was known. One
        run's error is logged and does not hold up the others."""
        results = [self._logged(self.publish_run, run) for run in self.publishable_runs()]
        with self.store.read() as session:
            orphans = orphaned_sends(session, lease_now(session, self.clock))
        results += [self._logged(self.settle_orphan, send) for send in orphans]
        return [result for result in results if result is not None]

    def _logged(
        self, step: Callable[[Subject], PublishResult | None], subject: Subject
    ) -> PublishResult | None:
        try:
            return step(subject)
        except ConcurrentChange as exc:  # a person or another worker settled it first
            log.warning("publishing %s: %s", subject, exc)
        except GalleyError:
            log.exception("publishing %s failed; the next pass tries again", subject)
        return None

    def publish_run(self, run_id: str) -> PublishResult:
        """Each target of the run's recipe once, in order, each its own effect: one that
        succeeded before is answered from its receipt and never sent again."""
        started = self._start(run_id)
        if isinstance(started, PublishResult):
            if started.outcome == PublishOutcome.FAILED:  # missed its time: people are told
                self.alert(run_id)
            return started
        recipe, approved = started
        failpoint(Failpoint.AFTER_PUBLISHING_COMMIT)
        done: list[TargetDone] = []
        publishers = publishers_of(self.publisher_for, recipe)
        for publisher in publishers:
            key = publish_effect_key(approved.draft_key, publisher.target)
            publication = shaped_for(replace(approved, effect_key=key), publisher.target)
            renamed = self._renamed(publication, publisher, [p.target for p in publishers])
            performed = renamed or publish_version(
                publisher, publication, partial(self._publish_to, recipe, publisher, run_id=run_id)
            )
            done.append(TargetDone(publisher.target, performed))
            if performed.outcome == EffectOutcome.REFUSED:
                break  # cancelled, or sent back to review: no other target may go either
        return self._after(run_id, verdict(done, stale=NOT_SENT_STALE))

    def _publish_to(
        self,
        recipe: Recipe,
        publisher: Publisher,
        version: Publication,
        publication: Publication,
        *,
        run_id: str,
    ) -> Performed:
        """One effect (a target, or one part of its thread: `publication` is what is sent,
        `version` the target's whole version under its key, for the receipt's payload),
        looked up first, sent at most once; its receipt keeps the public URL."""
        spec = publish_spec(recipe, version, run_id)
        if isinstance(publisher, SendMarker) and publisher.marks_send:
            spec = replace(spec, marks_send=True)  # no look-up: the receipt marks the send
        shaped = publication  # with its uploaded images or card once `prepare` ran

        def prepare() -> None:  # each upload its own effect; the post's fence is passed again
            nonlocal shaped
            shaped = self._with_media(recipe, publisher, publication)
            if isinstance(publisher, ContainerPublisher):  # Threads: the first of two steps
                timeout = recipe.call_timeout
                shaped = with_container(
                    self.ledger, publisher, shaped, run_id=run_id, call_timeout=timeout
                )

        def send() -> Proof:
            external_id = publisher.publish(shaped)
            # sent, not yet recorded: the lookup must find it
            failpoint(Failpoint.AFTER_PUBLISH_CALL)
            sent = with_card_note(proof_of(publisher, external_id), shaped.card)
            proof = proof_of_version(sent, publisher, publication)
            assert proof is not None
            return proof

        def lookup() -> Proof | None:
            found = found_at(publisher, self._query(publication))
            return proof_of_version(found, publisher, publication)

        try:
            return self.ledger.perform(
                spec,
                send,
                lookup=lookup,
                may_act=lambda session, _now: self._may_send(session, recipe, run_id, publication),
                look_first=True,  # a restored database has no receipt: the destination knows
                prepare=prepare,
                before_call=partial(failpoint, Failpoint.BEFORE_PUBLISH_CALL),
            )
        except KeyPayloadConflict as exc:  # sent with another text: never sent again; told
            said = f"{publisher.target} was sent another text of this draft: {exc}"
            return Performed(EffectOutcome.NOT_SENT, detail=said, refusal=_refused_for_good(said))

    def _with_media(
        self, recipe: Recipe, publisher: Publisher, publication: Publication
    ) -> Publication:
        """The publication with its images as the target holds them, each uploaded once,
        or its link card (docs/design.md §32); a target that takes no bytes (a webhook)
        gets the references, a target that sends them inside the post (Discord) their
        bytes."""
        if isinstance(publisher, AttachmentTaker) and publisher.takes_attachments:
            library = ImageLibrary(self.store, self.clock)
            attached = tuple(image_bytes(library, image) for image in publication.images)
            return replace(publication, attachments=attached)
        if not isinstance(publisher, ImageUploader):
            return publication
        library = ImageLibrary(self.store, self.clock)
        uploads = ImageUploads(self.ledger, library)
        run_id = run_of_draft_key(publication.draft_key)
        if publication.images:
            media = uploads.upload_all(
                publisher,
                publisher.target,
                publication.draft_key,
                publication.images,
                run_id=run_id,
                call_timeout=recipe.call_timeout,
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
                call_timeout=recipe.call_timeout,
                egress=Egress(self.config.egress),
            )
            return replace(publication, card=card)
        return publication

    def _renamed(
        self, publication: Publication, publisher: Publisher, current: list[str]
    ) -> Performed | None:
        """A target whose id changed in the config after this draft was sent under the old
        one is not sent again under the new: the run fails, saying so, and people decide."""
        with self.store.read() as session:
            old = renamed_target(session, publication.draft_key, publisher.target, current)
        if old is None:
            return None
        said = (
            f"{publisher.target} is not sent: this draft went to {old} before the config "
            "changed, and they may be one account; check it, then cancel or restore the target"
        )
        return Performed(EffectOutcome.NOT_SENT, detail=said, refusal=_refused_for_good(said))

    def _query(self, publication: Publication) -> PostQuery:
        """The look-up of this target's receipt: what it was sent with, since when."""
        fallback = PostQuery(
            publication.effect_key,
            publication.text,
            publication.approved_at,
            reply_to=publication.reply_to,
        )
        return post_query(self.store, publication.effect_key, fallback)

    def _may_send(
        self, session: Session, recipe: Recipe, run_id: str, publication: Publication
    ) -> str | None:
        """The last look before a send, under its receipt: the run still publishes this
        draft, the draft is still approved, and the approval is still fresh (a stale one
        sends the draft back to review, in this same transaction)."""
        run = _locked_run(session, run_id)
        draft = required(lock_draft(session, publication.draft_key), "draft")
        sending = (RunState.PUBLISHING, RunState.UNCERTAIN)
        if run.state not in sending:
            if run.state == RunState.CANCELLED and draft.state == DraftState.APPROVED:
                now = self.clock.now()
                move_draft(session, draft, DraftState.CANCELLED, actor=PUBLISHER, at=now)
            return NOT_SENT_CANCELLED
        holds = any(run_holds(run, draft.key, state) for state in sending)
        if not holds or draft.state != DraftState.APPROVED:
            return f"{draft.key} is {draft.state}: its run no longer publishes it"
        now = lease_now(session, self.clock)  # after the locks, the database's clock
        if approval_stale(recipe, draft.decided_at, run.publish_at, now):
            # A new send needs a fresh approval, even for a run resolved days later.
            _send_back(session, run, draft, recipe.approval_ttl, now)
            return NOT_SENT_STALE
        return None

    def _after(self, run_id: str, found: Verdict) -> PublishResult:
        """What the targets' outcomes mean for the run."""
        match found.outcome:
            case PublishOutcome.PUBLISHED:
                return self._finish(run_id, found.external_id or "")
            case PublishOutcome.FAILED:
                return self._refused(run_id, found)
            case PublishOutcome.UNCERTAIN:
                return self._uncertain(run_id, found.detail or "outcome unknown")
        return PublishResult(found.outcome, run_id, found.detail)

    def _refused(self, run_id: str, found: Verdict) -> PublishResult:
        """A destination refused the publication itself: the run fails (a person retries
        it once the cause is fixed); refused credentials (401/403) stop and tell people."""
        reason = FailReason.PUBLISH_AUTH if found.auth else FailReason.PUBLISH_REJECTED
        detail = found.detail or str(found.refusal)
        self._move(run_id, RunState.FAILED, reason=reason, detail=detail)
        if found.auth:
            self.alert(run_id)
        return PublishResult(PublishOutcome.FAILED, run_id, detail)

    def settle_orphan(self, send: OrphanedSend) -> PublishResult | None:
        """Ask the destination about a send its run no longer publishes (`orphans.py`)."""
        recipe = self.config.recipes.get(send.recipe)
        publishers = [] if recipe is None else publishers_of(self.publisher_for, recipe)
        settler = OrphanSettler(self.store, self.config, self.clock, self.ledger)
        return settler.settle(send, publishers)

    def _start(self, run_id: str) -> tuple[Recipe, Publication] | PublishResult:
        """One transaction: check the approval is fresh, move to `publishing`."""
        with self.store.transaction() as session:
            run = _locked_run(session, run_id)
            now = lease_now(session, self.clock)  # one clock for due, stale and too late
            recipe = self.config.recipes.get(run.recipe)
            if recipe is None or recipe.publish is None or run.state not in PUBLISHABLE:
                return PublishResult(PublishOutcome.NOT_READY, run_id)
            if run.state == RunState.UNCERTAIN and not look_up_due(run, recipe, now):
                grace = format_duration(lookup_grace(recipe))
                said = f"its lost answer is looked up {grace} after it (the read delay)"
                return PublishResult(PublishOutcome.NOT_READY, run_id, said)
            draft = _draft(session, run)
            if draft.state not in (DraftState.APPROVED, DraftState.PUBLISHED):
                # only an approved draft leaves the building: never a superseded one
                return PublishResult(PublishOutcome.NOT_READY, run_id, f"draft is {draft.state}")
            if run.state == RunState.APPROVED:
                if not_yet(run.publish_at, now):
                    return PublishResult(PublishOutcome.NOT_READY, run_id, "its time has not come")
                if approval_stale(recipe, draft.decided_at, run.publish_at, now):
                    _send_back(session, run, draft, recipe.approval_ttl, now)
                    return PublishResult(PublishOutcome.SENT_BACK, run_id, "approval too old")
                if miss_its_time(session, recipe, run, now):  # never late beyond publish_late
                    return PublishResult(PublishOutcome.FAILED, run_id, "missed its slot")
                failpoint(Failpoint.PUBLISH_START_READ)  # tests: Unapprove racing the start
                move_run(session, run, RunState.PUBLISHING, actor=PUBLISHER, at=now)
            if draft.decided_by is None or draft.decided_at is None:
                return PublishResult(PublishOutcome.NOT_READY, run_id, "no approval on record")
            target = self._target(run.recipe)
            assert target is not None
            return recipe, Publication(
                effect_key=publish_effect_key(draft.key, target),
                draft_key=draft.key,
                recipe=run.recipe,
                platform=draft.platform,
                slot_at=run.slot_at,
                text=draft.text or "",
                approver=draft.decided_by,
                approved_at=draft.decided_at,
            )

    def _uncertain(self, run_id: str, detail: str) -> PublishResult:
        """The run is uncertain; people are told only when this was a look-up after the
        destination's read delay that could not tell (docs/design.md §9): a lost answer
        just now is looked up first, by a later pass."""
        self._move(run_id, RunState.UNCERTAIN, detail=detail)  # only a publishing run
        with self.store.read() as session:
            run = required(run_row(session, run_id), f"run {run_id}")
        if look_up_due(run, self.config.recipes.get(run.recipe), self.clock.now()):
            self.alert(run_id)
        return PublishResult(PublishOutcome.UNCERTAIN, run_id, detail)

    def _finish(self, run_id: str, external_id: str) -> PublishResult:
        with self.store.transaction() as session:
            now = self.clock.now()
            run = _locked_run(session, run_id)
            draft = _draft(session, run)
            if draft.state == DraftState.APPROVED:
                move_draft(
                    session,
                    draft,
                    DraftState.PUBLISHED,
                    actor=PUBLISHER,
                    at=now,
                    reason=external_id,
                )
            if run.state in (RunState.PUBLISHING, RunState.UNCERTAIN):
                move_run(
                    session,
                    run,
                    RunState.SUCCEEDED,
                    actor=PUBLISHER,
                    at=now,
                    detail=f"published as {external_id}",
                )
            elif run.state == RunState.CANCELLED:
                note = f"completed after cancellation: publish {run.draft_key} → {external_id}"
                note_outcome(session, run, note, now)
        return PublishResult(PublishOutcome.PUBLISHED, run_id, external_id=external_id)

    def _move(
        self, run_id: str, state: RunState, *, reason: str | None = None, detail: str
    ) -> None:
        """The run moves to `state` if it still may: a person may have settled it."""
        with self.store.transaction() as session:
            run = _locked_run(session, run_id)
            if run_may_move(run.state, state):
                now = self.clock.now()
                move_run(session, run, state, actor=PUBLISHER, at=now, reason=reason, detail=detail)

    def _target(self, recipe_name: str) -> str | None:
        recipe = self.config.recipes.get(recipe_name)
        return None if recipe is None or recipe.publish is None else recipe.publish.target


def _refused_for_good(said: str) -> EffectNotSent:
    """A target that can never take this draft as it is: the run fails, people decide."""
    return EffectNotSent(said, permanent=True)


def _locked_run(session: Session, run_id: str) -> RunRow:
    return required(lock_run(session, run_id), f"run {run_id}")


def _draft(session: Session, run: RunRow) -> DraftRow:
    return required(lock_draft_of(session, run), f"draft of run {run.id}")


def _send_back(
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


def shaped_for(approved: Publication, target: str) -> Publication:
    """The approved draft as `target` publishes it: its own version of the body (or the
    one for every target), split into the first part and the thread's replies, with the
    body's images (docs/design.md §30, §31 and §32). A plain draft comes out as it went in."""
    body = PostBody.parse(approved.text)
    first, *replies = body.parts_for(target)
    return replace(approved, text=first, replies=tuple(replies), images=body.images)
