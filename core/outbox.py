"""The review outbox: every `ready` draft reaches people exactly once, and its message
keeps up with its state. Drafts made anywhere (the bot, `galley draft`, a notebook) are
posted by whichever bot runs next.

Each post is an effect with a receipt (`<draft key>|review`). A post whose outcome is
unknown is looked up at the destination before any second attempt; never re-sent blind.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

from sqlmodel import Session, col, select

from core.effects import EffectDecision, EffectLedger, EffectStart
from core.errors import EffectInProgress, EffectNotSent, EffectOutcomeUnknown, LookupUnavailable
from core.failpoints import failpoint
from core.gate import ready_count
from core.identity import review_effect_key
from core.models import DraftRow, EffectRow, RecipeRow, RunRow
from core.ports import MessageRef, ReviewItem, ReviewSurface
from core.review import review_item
from core.states import DraftState, EffectState
from core.store import Store

log = logging.getLogger(__name__)
REVIEW_STEP = "review"
SHOWN_STATES = (DraftState.APPROVED, DraftState.REJECTED, DraftState.EXPIRED, DraftState.SUPERSEDED)


class ReviewOutbox:
    def __init__(
        self,
        store: Store,
        ledger: EffectLedger,
        surface: ReviewSurface,
        *,
        channel: str,
        call_lease: timedelta,
    ) -> None:
        self.store, self.ledger, self.surface = store, ledger, surface
        self.channel = channel
        self.call_lease = call_lease  # longer than one Slack call: a live post is not stolen

    def post_ready_drafts(self) -> int:
        """Post every ready draft that has no review receipt yet; returns how many."""
        posted = 0
        for item in self._unposted():
            if self.post_one(item) is not None:
                posted += 1
        return posted

    def post_one(self, item: ReviewItem) -> MessageRef | None:
        key = review_effect_key(item.draft_key)
        payload = {"channel": self.channel, "draft_key": item.draft_key}
        try:
            start = self.ledger.begin(
                key,
                draft_key=item.draft_key,
                step=REVIEW_STEP,
                payload=payload,
                lease=self.call_lease,
                run_id=item.run_id,
            )
        except EffectInProgress:
            return None
        if start.decision == EffectDecision.DONE:
            return _ref(start.receipt.result)
        if start.decision == EffectDecision.RECONCILE and not self._reconcile(key, item):
            return None
        if start.decision == EffectDecision.RECONCILE:
            return self.post_one(item)  # found (DONE) or clearly absent (ACT) now
        return self._post(key, item)

    def _post(self, key: str, item: ReviewItem) -> MessageRef | None:
        failpoint("before_review_post")
        try:
            ref = self.surface.post_review(item)
        except EffectNotSent as exc:
            self.ledger.fail(key, str(exc), run_id=item.run_id)
            return None
        except EffectOutcomeUnknown as exc:
            self.ledger.mark_uncertain(key, str(exc), run_id=item.run_id)
            return None
        failpoint("after_review_post")  # posted, not yet recorded: the lookup must find it
        self.ledger.succeed(key, ref.ts, {"channel": ref.channel, "ts": ref.ts}, run_id=item.run_id)
        return ref

    def _reconcile(self, key: str, item: ReviewItem) -> bool:
        """Look before you leap: True once the receipt says found or absent."""
        try:
            found = self.surface.find_review(item.draft_key)
        except LookupUnavailable as exc:
            log.warning("cannot tell whether %s was posted: %s", key, exc)
            return False
        if found is None:
            self.ledger.fail(key, "not found in the channel history", run_id=item.run_id)
        else:
            self.ledger.succeed(key, found.ts, {"channel": found.channel, "ts": found.ts})
        return True

    def sync_messages(self) -> int:
        """Make decided, expired, superseded and edited drafts' messages say so (once each).

        A decided draft whose review post was left uncertain is looked up first, so the
        decision still reaches the message people clicked on.
        """
        for item in self._decided_with_unsettled_posts():
            key = review_effect_key(item.draft_key)
            try:
                self.ledger.begin(  # an expired in-flight receipt becomes uncertain here
                    key,
                    draft_key=item.draft_key,
                    step=REVIEW_STEP,
                    payload={"channel": self.channel, "draft_key": item.draft_key},
                    lease=self.call_lease,
                    run_id=item.run_id,
                )
            except EffectInProgress:
                continue
            self._reconcile(key, item)  # found: succeeded; absent: failed, nothing to show
        return sum(self._update_once(item, ref) for item, ref in self._messages_to_refresh())

    def show_now(self, item: ReviewItem) -> None:
        """Update one message right after a click, without waiting for the next pass.
        Keyed by state and revision, so two clicks on one decision update it once."""
        ref = self.review_ref(item.draft_key)
        if ref is not None:
            self._update_once(item, ref)

    def _update_once(self, item: ReviewItem, ref: MessageRef) -> int:
        key = f"{review_effect_key(item.draft_key)}-update:{item.state}:{item.revision}"
        if self._begin_update(key, item, ref) is None:
            return 0
        try:
            self.surface.update_review(ref, item)
        except (EffectNotSent, EffectOutcomeUnknown) as exc:
            # An update is safe to repeat: a failed one is simply tried again later.
            self.ledger.fail(key, str(exc), run_id=item.run_id)
            return 0
        self.ledger.succeed(key, ref.ts, run_id=item.run_id)
        return 1

    def review_ref(self, draft_key: str) -> MessageRef | None:
        receipt = self.ledger.get(review_effect_key(draft_key))
        if receipt is None or receipt.state != EffectState.SUCCEEDED:
            return None
        return _ref(receipt.result)

    def announce_backpressure(self, limits: dict[str, int]) -> int:
        """Tell people once when a recipe pauses for backpressure, and once when it resumes."""
        told = 0
        with self.store.transaction() as session:
            rows = session.exec(
                select(RecipeRow).where(col(RecipeRow.backpressure_since).is_not(None))
            ).all()
        for row in rows:
            assert row.backpressure_since is not None
            episode = f"backpressure|{row.name}|{row.backpressure_since.isoformat()}"
            with self.store.transaction() as session:
                waiting = ready_count(session, row.name)
            notices = [(f"{episode}|paused", _paused_text(row.name, waiting, limits.get(row.name)))]
            if row.backpressure_resumed_at is not None:
                notices.append((f"{episode}|resumed", f"Drafting resumed for *{row.name}*."))
            for key, text in notices:
                told += self._announce_once(key, text)
        return told

    def _announce_once(self, key: str, text: str) -> int:
        try:
            start = self.ledger.begin(
                key, draft_key="", step="notice", payload={"text": text}, lease=self.call_lease
            )
        except EffectInProgress:
            return 0
        if start.decision != EffectDecision.ACT:
            return 0  # a notice whose outcome is unknown is not worth a second ping
        try:
            ref = self.surface.announce(text)
        except (EffectNotSent, EffectOutcomeUnknown) as exc:
            self.ledger.fail(key, str(exc))
            return 0
        self.ledger.succeed(key, ref.ts)
        return 1

    def _begin_update(self, key: str, item: ReviewItem, ref: MessageRef) -> EffectStart | None:
        try:
            start = self.ledger.begin(
                key,
                draft_key=item.draft_key,
                step="review-update",
                payload={"channel": ref.channel, "ts": ref.ts, "state": item.state},
                lease=self.call_lease,
                run_id=item.run_id,
            )
        except EffectInProgress:
            return None
        return start if start.decision != EffectDecision.DONE else None

    def _unposted(self) -> list[ReviewItem]:
        with self.store.transaction() as session:
            rows = session.exec(
                select(DraftRow, RunRow)
                .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
                .where(col(DraftRow.state) == DraftState.READY)
                .order_by(col(DraftRow.ready_at))
            ).all()
            done = self._receipted(session, [d.key for d, _ in rows])
            return [review_item(d, r) for d, r in rows if review_effect_key(d.key) not in done]

    def _decided_with_unsettled_posts(self) -> list[ReviewItem]:
        with self.store.transaction() as session:
            rows = session.exec(
                select(DraftRow, RunRow, EffectRow)
                .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
                .join(EffectRow, col(EffectRow.draft_key) == col(DraftRow.key))
                .where(
                    col(DraftRow.state).in_(SHOWN_STATES),
                    col(EffectRow.step) == REVIEW_STEP,
                    col(EffectRow.state).in_([EffectState.UNCERTAIN, EffectState.IN_FLIGHT]),
                )
            ).all()
            return [review_item(draft, run) for draft, run, _ in rows]

    def _messages_to_refresh(self) -> list[tuple[ReviewItem, MessageRef]]:
        """Drafts whose message may be behind: decided ones, and edited ones."""
        edited = (col(DraftRow.state) == DraftState.READY) & (col(DraftRow.revision) > 1)
        with self.store.transaction() as session:
            rows = session.exec(
                select(DraftRow, RunRow)
                .join(RunRow, col(RunRow.id) == col(DraftRow.run_id))
                .where(col(DraftRow.state).in_(SHOWN_STATES) | edited)
            ).all()
            receipts = {
                e.key: e
                for e in session.exec(
                    select(EffectRow).where(
                        col(EffectRow.key).in_([review_effect_key(d.key) for d, _ in rows]),
                        col(EffectRow.state) == EffectState.SUCCEEDED,
                    )
                ).all()
            }
        pairs = []
        for draft, run in rows:
            receipt = receipts.get(review_effect_key(draft.key))
            if receipt is not None and receipt.result:
                pairs.append((review_item(draft, run), _ref_json(receipt.result)))
        return pairs

    @staticmethod
    def _receipted(session: Session, draft_keys: list[str]) -> set[str]:
        keys = [review_effect_key(k) for k in draft_keys]
        return set(
            session.exec(
                select(EffectRow.key).where(
                    col(EffectRow.key).in_(keys), col(EffectRow.state) == EffectState.SUCCEEDED
                )
            ).all()
        )


def _paused_text(recipe: str, waiting: int, limit: int | None) -> str:
    drafts = "1 draft" if waiting == 1 else f"{waiting} drafts"
    of_limit = f" (limit {limit})" if limit is not None else ""
    return (
        f"Drafting paused for *{recipe}*: {drafts} waiting for review{of_limit}. "
        "It resumes by itself once people catch up."
    )


def _ref(result: dict[str, object] | None) -> MessageRef | None:
    if not result:
        return None
    return MessageRef(channel=str(result["channel"]), ts=str(result["ts"]))


def _ref_json(result: str) -> MessageRef:
    data = json.loads(result)
    return MessageRef(channel=data["channel"], ts=data["ts"])
