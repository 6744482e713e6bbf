"""Sends whose run stopped publishing them before their outcome was known (cancelled, or
moved on to another draft): each is looked up until known, never sent again, and what
became of it joins the run's list (docs/design.md §12). A draft found published on one
target is `published` only once every target has proof (docs/design.md §24).
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from core.errors import LookupUnavailable
from core.failpoints import Failpoint, failpoint
from core.identity import target_of_publish_key
from core.models import EffectRow, RunRow
from core.policies import EffectOutcome, PublishOutcome
from core.ports import Clock, PostQuery, Publisher
from core.publishing.lookup_proof import part_text, post_query, sent_from, stored_spec
from core.publishing.lost_answers import lookup_grace
from core.publishing.queue import OrphanedSend
from core.publishing.results import PublishResult
from core.publishing.targets import all_published, found_at
from core.setup.config import Config, Recipe
from core.states import DraftState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.leases import PUBLISHER, lease_now
from core.store.receipts import Proof
from core.store.rows import lock_draft, lock_run, required
from core.store.transitions import guarded_update, move_draft, note_run

ORPHAN_NOT_SENT = "absent at the destination; its run no longer publishes it, so it is not sent"


class OrphanSettler:
    def __init__(self, store: Store, config: Config, clock: Clock, ledger: EffectLedger) -> None:
        self.store, self.config, self.clock, self.ledger = store, config, clock, ledger

    def settle(self, send: OrphanedSend, publishers: list[Publisher]) -> PublishResult | None:
        """Ask the destination about an orphaned send (`publishers`: its recipe's); None
        while nobody can tell (people heard of it when they cancelled). Absent, its
        receipt says it never happened."""
        recipe = self.config.recipes.get(send.recipe)
        if recipe is None or recipe.publish is None:
            return None  # no destination left to ask
        publisher = next(
            (p for p in publishers if target_of_publish_key(send.effect_key) == p.target),
            None,
        )
        if publisher is None:
            return None  # the recipe publishes elsewhere now
        if self._within_read_delay(send, recipe):
            return None  # not found may only mean not shown yet (docs/design.md §9)
        try:
            stored = sent_from(self.store, send.effect_key) or send.text
            fallback = PostQuery(send.effect_key, part_text(stored, send.effect_key), send.since)
            query = post_query(self.store, send.effect_key, fallback)  # the text it was sent with
            probe = found_at(publisher, query)  # before anything is written
        except LookupUnavailable:
            return None
        noted: list[Proof | None] = []

        def note(found: Proof | None) -> None:
            # The run and draft first, the receipt last: a pass that stops in between
            # leaves the receipt unsettled, so the next one finds the send again and
            # notes it once.
            if found is None:
                self._note(send, f"not sent: publish {send.draft_key}")
            else:
                outcome = f"publish {send.draft_key} → {found.external_id}"
                self._note(send, outcome, published=True)
            failpoint(Failpoint.ORPHAN_NOTED)
            noted.append(found)

        done = self.ledger.settle_by_lookup(
            stored_spec(recipe, send.effect_key, send.draft_key, stored, send.run_id),
            lambda: probe or found_at(publisher, query),  # absent: ask again, holding it
            not_sent=ORPHAN_NOT_SENT,
            record=note,
        )
        if done.outcome == EffectOutcome.FOUND:
            return PublishResult(
                PublishOutcome.PUBLISHED, send.run_id, external_id=done.external_id
            )
        if noted:
            return PublishResult(PublishOutcome.NOT_READY, send.run_id, ORPHAN_NOT_SENT)
        return None

    def _within_read_delay(self, send: OrphanedSend, recipe: Recipe) -> bool:
        """The send's last attempt is younger than the destination's read delay: a look-up
        now could find it absent and record a post that is there as never sent."""
        with self.store.read() as session:
            receipt = session.get(EffectRow, send.effect_key)
            now = lease_now(session, self.clock)
        return receipt is not None and now < receipt.updated_at + lookup_grace(recipe)

    def _note(self, send: OrphanedSend, outcome: str, *, published: bool = False) -> None:
        with self.store.transaction() as session:
            now = self.clock.now()
            run = required(lock_run(session, send.run_id), f"run {send.run_id}")
            draft = required(lock_draft(session, send.draft_key), f"draft {send.draft_key}")
            recipe = self.config.recipes.get(send.recipe)
            if (
                published
                and draft.state == DraftState.APPROVED
                and recipe is not None
                and all_published(session, recipe, draft.key, proven=send.effect_key)
            ):
                move_draft(session, draft, DraftState.PUBLISHED, actor=PUBLISHER, at=now)
            when = "after cancellation" if run.state == RunState.CANCELLED else "later"
            note_outcome(
                session, run, f"completed {when}: {outcome}" if published else outcome, now
            )


def note_outcome(session: Session, run: RunRow, note: str, now: datetime) -> None:
    """What became of a send after its run stopped publishing it. On a cancelled run it
    joins the list of completed effects (its reason), so people see what went out."""
    if run.state == RunState.CANCELLED:
        if note in (run.reason or ""):
            return  # noted already, by a pass that stopped before settling the receipt
        run.reason = f"{run.reason or 'completed effects: none'}; {note}"
        run.updated_at = now
        guarded_update(session, run, state=RunState.CANCELLED)
    note_run(session, run, actor=PUBLISHER, at=now, reason=note)
