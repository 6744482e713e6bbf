"""The review outbox: every `ready` draft reaches people exactly once, and its message
keeps up with its state. Drafts made anywhere (the bot, `galley draft`, a notebook) are
posted by whichever bot runs next.

Each post is an effect with a receipt (`<draft key>|review`). A post whose outcome is
unknown is looked up at the destination before any second attempt; never re-sent blind.
When the lookup cannot tell (the channel's history is too long to search), people are
told, since nothing else will settle it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from datetime import timedelta

from core.drafting.gate import ready_count
from core.errors import GalleyError, MessageGone
from core.failpoints import Failpoint, failpoint
from core.identity import notice_key, review_effect_key, review_update_key
from core.models import RecipeRow
from core.policies import Backpressure, EffectOutcome, EffectStep
from core.ports import (
    ApprovalProgress,
    BackpressureNotice,
    MessageRef,
    ReviewItem,
    ReviewSurface,
)
from core.publishing.targets import published_links
from core.review import messages as review_messages
from core.review.approvals import waiting_with_approvals
from core.review.message_fences import PostFence, RewriteFence
from core.review.queue import load_item, review_item
from core.states import DraftState, EffectState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.receipts import EffectSpec, Proof, Receipt

log = logging.getLogger(__name__)
SHOWN_STATES = (
    DraftState.APPROVED,
    DraftState.REJECTED,
    DraftState.EXPIRED,
    DraftState.SUPERSEDED,
    DraftState.CANCELLED,
)
REWRITTEN_STATES = (*SHOWN_STATES, DraftState.PUBLISHED)  # the message ends where the post is
NOT_POSTED = "decided before its post was found in the channel: not posted"


class ReviewOutbox:
    def __init__(
        self,
        store: Store,
        ledger: EffectLedger,
        surface: ReviewSurface,
        *,
        channel: str,
        call_lease: timedelta,
        on_wire: timedelta = timedelta(0),
        unfindable: Callable[[ReviewItem, str], object] | None = None,
        gone: Callable[[ReviewItem, str], object] | None = None,
    ) -> None:
        """`unfindable(item, why)` is told of a post whose outcome is unknown and that a
        lookup cannot find or rule out: people must look. `gone(item, why)` is told of a
        review message deleted in the channel: it is never rewritten again."""
        self.store, self.ledger, self.surface = store, ledger, surface
        self.channel = channel
        self.call_lease = call_lease  # longer than one Slack call: a live post is not stolen
        self.on_wire = on_wire  # one call's limit: a lapsed holder's post may still land
        self.unfindable = unfindable or (lambda item, why: None)
        self.gone = gone or (lambda item, why: None)
        self._posted_listeners: list[Callable[[ReviewItem, MessageRef], object]] = []

    def when_posted(self, listener: Callable[[ReviewItem, MessageRef], object]) -> None:
        """`listener(item, ref)` is told of each review message this outbox posts, once
        recorded: the bot subscribes `Work.describe_source_images_soon` (bot/run.py), which
        proposes alt text for a source item's image off this pass (docs/design.md §32)."""
        self._posted_listeners.append(listener)

    def post_ready_drafts(self) -> int:
        """Post every ready draft that has no review receipt yet; returns how many."""
        posted = 0
        for item in self._unposted():
            if self.post_one(item) is not None:
                posted += 1
        return posted

    def post_one(self, item: ReviewItem) -> MessageRef | None:
        def post() -> Proof:
            failpoint(Failpoint.BEFORE_REVIEW_POST)
            ref = self.surface.post_review(item)
            # posted, not yet recorded: the lookup must find it
            failpoint(Failpoint.AFTER_REVIEW_POST)
            return _proof(ref)

        done = self.ledger.perform(
            self._review_spec(item),
            post,
            lookup=self._finder(item),
            may_act=PostFence(item).may_act,
        )
        if done.outcome == EffectOutcome.CANNOT_TELL:
            log.warning("cannot tell whether %s was posted: %s", item.draft_key, done.detail)
            self.unfindable(item, done.detail or "")
            return None
        if not done.happened or done.receipt is None:
            return None
        self._shown([item], unknown=True)  # posted now or found: which revision, unsure
        ref = _ref(done.receipt.result)
        if ref is not None and done.outcome in (EffectOutcome.SENT, EffectOutcome.FOUND):
            failpoint(Failpoint.AFTER_REVIEW_RECORDED)
            for listener in self._posted_listeners:
                listener(item, ref)
        return ref

    def _review_spec(self, item: ReviewItem) -> EffectSpec:
        return EffectSpec(
            review_effect_key(item.draft_key),
            draft_key=item.draft_key,
            step=EffectStep.REVIEW,
            payload={"channel": self.channel, "draft_key": item.draft_key},
            lease=self.call_lease,
            run_id=item.run_id,
            on_wire=self.on_wire,  # taken over only once its post cannot still land
        )

    def _finder(self, item: ReviewItem) -> Callable[[], Proof | None]:
        def find() -> Proof | None:
            found = self.surface.find_review(item.draft_key)
            return None if found is None else _proof(found)

        return find

    def _settle_unknown_post(self, item: ReviewItem) -> None:
        """A decided draft whose post's outcome is unknown: find it (so the decision can
        be shown on it) or rule it out; never post it now."""
        done = self.ledger.settle_by_lookup(
            self._review_spec(item), self._finder(item), not_sent=NOT_POSTED
        )
        if done.outcome == EffectOutcome.CANNOT_TELL:
            self.unfindable(item, done.detail or "")
        elif done.outcome == EffectOutcome.FOUND:
            self._shown([item], unknown=True)

    def sync_messages(self) -> int:
        """Make decided, expired, superseded and edited drafts' messages say so (once each).

        A decided draft whose review post was left uncertain is looked up first, so the
        decision still reaches the message people clicked on.
        """
        for item in self._decided_with_unsettled_posts():
            try:
                self._settle_unknown_post(item)
            except GalleyError:
                log.exception("settling the review post of %s failed", item.draft_key)
        refreshed = sum(self._update_once(item, ref) for item, ref in self._messages_to_refresh())
        return refreshed + self._show_publications_so_far() + self._show_gone_posts()

    def _show_publications_so_far(self) -> int:
        """An approved draft some targets published while another failed or waits: its
        message links each post already out at once, not after a retry (docs/design.md
        §24). One rewrite per number of targets published, so each new one is shown."""
        with self.store.read() as session:
            rows = review_messages.approved_partly_published(session)
            draft_keys = [draft.key for draft, _ in rows]
            links = published_links(session, draft_keys)
            items = [
                dataclasses.replace(review_item(d, r), published=tuple(links.get(d.key, ())))
                for d, r in rows
            ]
            keys = {item.draft_key: _rewrite_key(item) for item in items}
            done = review_messages.settled(session, list(keys.values()))
        shown = 0
        for item in items:
            ref = None if keys[item.draft_key] in done else self.review_ref(item.draft_key)
            if ref is not None and item.published:
                shown += self._update_once(item, ref)
        return shown

    def _show_gone_posts(self) -> int:
        """A post found gone after publication is said on its draft's message, once
        (docs/design.md §28): the rewrite is keyed by how many of its posts are gone, and
        the posts are marked shown once it went out (or there is no message to rewrite)."""
        shown = 0
        with self.store.read() as session:
            draft_keys = review_messages.gone_unshown(session)
        for draft_key in draft_keys:
            with self.store.read() as session:
                receipts, notices = review_messages.gone_notices(session, draft_key)
            item = load_item(self.store, draft_key)
            ref = self.review_ref(draft_key)
            if item is None or ref is None:
                review_messages.mark_gone_shown(self.store, receipts)
                continue
            item = dataclasses.replace(item, gone=notices)
            shown += self._update_once(item, ref)
            if _done(self.ledger.get(_rewrite_key(item))):
                review_messages.mark_gone_shown(self.store, receipts)
        return shown

    def show_approvals(self) -> int:
        """Bring waiting drafts' messages up to the approvals given so far, once each: an
        approval made in a notebook or the CLI, or a click whose rewrite did not go out
        (docs/design.md §22). Each count is a rewrite of its own."""
        with self.store.read() as session:
            waiting = waiting_with_approvals(session)
            items = [  # who approved is enough to key the rewrite; the surface annotates
                dataclasses.replace(
                    review_item(draft, run), approvals=ApprovalProgress(people, len(people))
                )
                for draft, run, people in waiting
            ]
            keys = {i.draft_key: _rewrite_key(i) for i in items}
            done = review_messages.settled(session, list(keys.values()))
        shown = 0
        for item in items:
            ref = None if keys[item.draft_key] in done else self.review_ref(item.draft_key)
            if ref is not None:
                shown += self._update_once(item, ref)
        return shown

    def show_now(self, item: ReviewItem) -> None:
        """Update one message right after a click, without waiting for the next pass.
        Keyed by state and revision, so two clicks on one decision update it once."""
        ref = self.review_ref(item.draft_key)
        if ref is not None:
            self._update_once(item, ref)

    def _update_once(self, item: ReviewItem, ref: MessageRef) -> int:
        """An update is safe to repeat: a failed or unknown one is simply tried again."""
        spec = EffectSpec(
            _rewrite_key(item),
            draft_key=item.draft_key,
            step=EffectStep.REVIEW_UPDATE,
            payload={"channel": ref.channel, "ts": ref.ts, "state": item.state},
            lease=self.call_lease,
            run_id=item.run_id,
        )
        if _done(self.ledger.get(spec.key)):
            self._shown([item])  # updated already, by another pass or replica
            return 0

        def update() -> Proof:
            self.surface.update_review(ref, item)
            return Proof(ref.ts)

        done = self.ledger.perform(
            spec,
            update,
            repeatable=True,
            may_act=RewriteFence(item, spec.key).may_act,
        )
        if isinstance(done.refusal, MessageGone):  # final for this message: no retry loop
            self._shown([item])
            self.gone(item, done.detail or "")
            return 0
        if not done.happened:
            return 0
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
        """Tell people once when a recipe pauses for backpressure, and once when it resumes.

        A notice is identified by its recipe, episode and kind, not by its text: the
        waiting count in the text changes as people review. One notice that cannot be
        sent does not hold up the others."""
        told = 0
        with self.store.read() as session:  # one read decides which notices are still due
            rows = review_messages.in_backpressure(session)
            done = review_messages.settled(
                session,
                [_notice_key(r, kind) for r in rows for kind in Backpressure],
            )
        for row in rows:
            assert row.backpressure_since is not None
            episode = row.backpressure_since.isoformat()
            notices = []
            if _notice_key(row, Backpressure.PAUSED) not in done:
                with self.store.read() as session:
                    waiting = ready_count(session, row.name)
                limit = limits.get(row.name)
                notices.append(BackpressureNotice(row.name, Backpressure.PAUSED, waiting, limit))
            resumed = row.backpressure_resumed_at is not None
            if resumed and _notice_key(row, Backpressure.RESUMED) not in done:
                notices.append(BackpressureNotice(row.name, Backpressure.RESUMED))
            for notice in notices:
                try:
                    told += self._announce_once(episode, notice)
                except GalleyError:
                    log.exception("the %s notice for %s failed", notice.kind, row.name)
        return told

    def _announce_once(self, episode: str, notice: BackpressureNotice) -> int:
        recipe, kind = notice.recipe, notice.kind
        spec = EffectSpec(
            notice_key(recipe, episode, kind),
            draft_key="",
            step=EffectStep.NOTICE,
            payload={"recipe": recipe, "episode": episode, "notice": kind},
            lease=self.call_lease,
            on_wire=self.on_wire,
        )
        if _done(self.ledger.get(spec.key)):
            return 0
        done = self.ledger.perform(spec, lambda: _proof(self.surface.announce(notice)))
        return 1 if done.happened else 0

    def _unposted(self) -> list[ReviewItem]:
        with self.store.read() as session:
            return [review_item(d, r) for d, r in review_messages.unposted(session)]

    def _decided_with_unsettled_posts(self) -> list[ReviewItem]:
        with self.store.read() as session:
            rows = review_messages.posts_not_settled(session, EffectStep.REVIEW, SHOWN_STATES)
            return [review_item(draft, run) for draft, run in rows]

    def _messages_to_refresh(self) -> list[tuple[ReviewItem, MessageRef]]:
        """Messages behind their draft that must say so: decided and published drafts
        (where it went out, and no Unapprove left), and edited ones. The others (a post
        found again) only record what they show."""
        with self.store.read() as session:
            rows = review_messages.behind(session)
        pairs, nothing_to_show = [], []
        for draft, run, receipt in rows:
            edited = draft.state == DraftState.READY and draft.revision > 1
            if receipt.result and (draft.state in REWRITTEN_STATES or edited):
                pairs.append((review_item(draft, run), _ref_json(receipt.result)))
            else:
                nothing_to_show.append((draft.key, draft.state, draft.revision))
        review_messages.mark_shown(self.store, nothing_to_show)
        return pairs


def _rewrite_key(item: ReviewItem) -> str:
    published = len(item.published) if item.state == DraftState.APPROVED else 0
    return review_update_key(
        item.draft_key,
        item.state,
        item.revision,
        _approvals_shown(item),
        len(item.gone),
        published,
    )


def _approvals_shown(item: ReviewItem) -> int:
    """Approvals a waiting draft's message shows: each one is a rewrite of its own."""
    if item.approvals is None or item.state != DraftState.READY:
        return 0
    return len(item.approvals.approvers)


def _notice_key(row: RecipeRow, kind: Backpressure) -> str:
    assert row.backpressure_since is not None
    return notice_key(row.name, row.backpressure_since.isoformat(), kind)


def _done(receipt: Receipt | None) -> bool:
    return receipt is not None and receipt.state == EffectState.SUCCEEDED


def _proof(ref: MessageRef) -> Proof:
    return Proof(ref.ts, {"channel": ref.channel, "ts": ref.ts})


def _ref(result: dict[str, object] | None) -> MessageRef | None:
    if not result:
        return None
    return MessageRef(channel=str(result["channel"]), ts=str(result["ts"]))


def _ref_json(result: str) -> MessageRef:
    data = json.loads(result)
    return MessageRef(channel=data["channel"], ts=data["ts"])
