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

from core import review_messages
from core.effects import EffectDecision, EffectLedger, EffectStart
from core.errors import EffectInProgress, EffectNotSent, EffectOutcomeUnknown, LookupUnavailable
from core.failpoints import failpoint
from core.gate import ready_count
from core.identity import review_effect_key
from core.models import RecipeRow
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
            self._shown([item], unknown=True)  # posted by a process that stopped after it
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
        self._shown([item])
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
            self._shown([item], unknown=True)
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
        start = self._begin_update(key, item, ref)
        if start is None or start.decision == EffectDecision.DONE:
            if start is not None:
                self._shown([item])  # updated already, by another pass or replica
            return 0
        try:
            self.surface.update_review(ref, item)
        except (EffectNotSent, EffectOutcomeUnknown) as exc:
            # An update is safe to repeat: a failed one is simply tried again later.
            self.ledger.fail(key, str(exc), run_id=item.run_id)
            return 0
        self.ledger.succeed(key, ref.ts, run_id=item.run_id)
        self._shown([item])
        return 1

    def _shown(self, items: list[ReviewItem], *, unknown: bool = False) -> None:
        """Record what these messages show now (unknown: posted, revision not known)."""
        review_messages.mark_shown(
            self.store,
            [
                (
                    i.draft_key,
                    i.state,
                    review_messages.POSTED_UNKNOWN_REVISION if unknown else i.revision,
                )
                for i in items
            ],
            unknown=unknown,
        )

    def review_ref(self, draft_key: str) -> MessageRef | None:
        receipt = self.ledger.get(review_effect_key(draft_key))
        if receipt is None or receipt.state != EffectState.SUCCEEDED:
            return None
        return _ref(receipt.result)

    def announce_backpressure(self, limits: dict[str, int]) -> int:
        """Tell people once when a recipe pauses for backpressure, and once when it resumes."""
        told = 0
        with self.store.read() as session:
            rows = review_messages.in_backpressure(session)
            episodes = {r.name: _episode(r) for r in rows}
            done = review_messages.settled(
                session, [f"{e}|{n}" for e in episodes.values() for n in ("paused", "resumed")]
            )
        for row in rows:
            episode = episodes[row.name]
            notices = []
            if f"{episode}|paused" not in done:
                with self.store.read() as session:
                    waiting = ready_count(session, row.name)
                text = _paused_text(row.name, waiting, limits.get(row.name))
                notices.append((f"{episode}|paused", text))
            if row.backpressure_resumed_at is not None and f"{episode}|resumed" not in done:
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
        return start

    def _unposted(self) -> list[ReviewItem]:
        with self.store.read() as session:
            return [review_item(d, r) for d, r in review_messages.unposted(session)]

    def _decided_with_unsettled_posts(self) -> list[ReviewItem]:
        with self.store.read() as session:
            rows = review_messages.posts_not_settled(session, REVIEW_STEP, SHOWN_STATES)
            return [review_item(draft, run) for draft, run in rows]

    def _messages_to_refresh(self) -> list[tuple[ReviewItem, MessageRef]]:
        """Messages behind their draft that must say so: decided drafts, and edited ones.
        The others (published, or a post found again) only record what they show."""
        with self.store.read() as session:
            rows = review_messages.behind(session)
        pairs, nothing_to_show = [], []
        for draft, run, receipt in rows:
            edited = draft.state == DraftState.READY and draft.revision > 1
            if receipt.result and (draft.state in SHOWN_STATES or edited):
                pairs.append((review_item(draft, run), _ref_json(receipt.result)))
            else:
                nothing_to_show.append((draft.key, draft.state, draft.revision))
        review_messages.mark_shown(self.store, nothing_to_show)
        return pairs


def _episode(row: RecipeRow) -> str:
    assert row.backpressure_since is not None
    return f"backpressure|{row.name}|{row.backpressure_since.isoformat()}"


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
