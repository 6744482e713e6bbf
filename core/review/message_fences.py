"""The last look before a review message goes out, taken by the ledger's fence under the
message's receipt (core/store/effects.py `MayAct`): a post only while its draft waits for
review, a rewrite only while it shows the draft as it is and no other is on its way.
It locks and reads the draft; it never posts and never changes a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from core.models import EffectRow, unsettled_receipt
from core.policies import EffectStep
from core.ports import ReviewItem
from core.states import DraftState, EffectState
from core.store.rows import lock_draft


@dataclass(frozen=True)
class PostFence:
    """The review post of `item`."""

    item: ReviewItem

    def may_act(self, session: Session, _now: datetime) -> str | None:
        """A review post goes out only while its draft still waits for review."""
        item = self.item
        draft = lock_draft(session, item.draft_key)
        if draft is None or draft.state != DraftState.READY:
            return f"{item.draft_key} is {draft.state if draft else 'gone'}: not posted for review"
        return None


@dataclass(frozen=True)
class RewriteFence:
    """The rewrite of `item`'s message under the receipt `key`."""

    item: ReviewItem
    key: str

    def may_act(self, session: Session, now: datetime) -> str | None:
        """A rewrite goes out only if it still shows the draft as it is, and no other
        rewrite of the same message is on its way: one that waited out a 429 would
        otherwise land after a newer one, and the message would show an older state for
        good. Refused, it is tried again by the next pass, from the draft as it is then.
        The draft's lock makes two rewrites' checks take turns."""
        item = self.item
        draft = lock_draft(session, item.draft_key)
        if draft is None or (draft.state, draft.revision) != (item.state, item.revision):
            return f"{item.draft_key} moved on: this rewrite would show an older state"
        other = session.exec(
            select(EffectRow.key).where(
                unsettled_receipt(EffectStep.REVIEW_UPDATE),
                col(EffectRow.draft_key) == item.draft_key,
                col(EffectRow.key) != self.key,
                col(EffectRow.state) == EffectState.IN_FLIGHT,
                col(EffectRow.lease_until) > now,  # a dead holder's rewrite holds nothing up
            )
        ).first()
        if other is not None:
            return f"another rewrite of {item.draft_key} is on its way ({other})"
        return None
