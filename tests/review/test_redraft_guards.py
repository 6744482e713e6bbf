"""A reviewer's redraft's guards (docs/design.md §22), each forced where it acts, on both
backends: the request is built only for the revision the claim is for (an edit after the
claim means no model call); a failed redraft is asked for again only from `failed` (a
claim that moved on since it was read is never written over). Final state only: rows
and the drafter's calls."""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import col

from core.drafting_policies import AttemptCause, RedraftState
from core.identity import redraft_key
from core.models import AttemptRow, RedraftRow
from core.policies import Refusal
from core.review.queue import edit, open_for_change
from core.review.redraft_claims import RedraftClaim, claim_redraft
from core.review.redrafting import RedraftService
from core.states import DraftState
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.review.test_redraft import (
    ANA,
    BEN,
    RefusingDrafter,
    claimed,
    config,
    drafted,
    redraft_attempts,
    the_draft,
)

# `clock` is test_redraft.py's fixture
from tests.review.test_redraft import clock as clock


def test_an_edit_after_the_claim_means_no_model_call_for_the_old_revision(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config()
    key = drafted(store, clock, cfg)
    drafter = InstantDrafter("Written for a revision nobody reads.")
    service = RedraftService(store, cfg, clock, drafter, worker="w2")
    claim = claimed(service, key)
    saved = edit(
        store, cfg, clock, draft_key=key, revision=1, text="Edited.", user=BEN, permitted=True
    )
    assert saved.accepted

    answer = service.run(claim)

    assert not answer.accepted and "no longer current" in answer.message
    assert drafter.calls == 0 and redraft_attempts(store, key) == []
    assert the_draft(store, key) == (DraftState.READY, 2, "Edited.")
    with store.read() as session:
        row = session.get(RedraftRow, claim.key)
        assert row is not None and row.state == RedraftState.FAILED


def test_a_failed_redraft_claimed_since_it_was_read_is_not_asked_again_over_its_holder(
    store: Store, clock: FrozenClock
) -> None:
    """The row was read `failed`; another holder claimed it before this ask wrote: the ask
    is refused and the holder keeps its claim (the write names `failed`)."""
    cfg = config()
    key = drafted(store, clock, cfg)
    refusing = RefusingDrafter()
    service = RedraftService(store, cfg, clock, refusing, worker="w2")
    assert not service.run(claimed(service, key)).accepted  # the redraft of revision 1 failed
    recipe = cfg.recipes["weekly-update"]

    with store.transaction() as session:
        found = open_for_change(session, key, 1, cfg, clock.now())
        assert isinstance(found, tuple)
        draft, _ = found
        read = session.get(RedraftRow, redraft_key(key, 1))
        assert read is not None and read.state == RedraftState.FAILED
        session.connection().execute(  # another holder's claim, written since the read
            sa.update(RedraftRow)
            .where(col(RedraftRow.key) == read.key)
            .values(state=RedraftState.CLAIMED, claimed_by="w9/holder", requested_by=BEN)
        )
        asked = claim_redraft(
            session, recipe, draft, note="again", user=ANA, owner="w3/asker", clock=clock
        )

    assert not isinstance(asked, RedraftClaim)
    assert asked[0] == Refusal.REDRAFTING
    with store.read() as session:
        row = session.get(RedraftRow, redraft_key(key, 1))
        assert row is not None
        assert (row.state, row.claimed_by, row.requested_by) == (
            RedraftState.CLAIMED,
            "w9/holder",
            BEN,
        )
        calls = session.exec(
            sa.select(sa.func.count()).where(col(AttemptRow.cause) == AttemptCause.REDRAFT)
        ).one()
    assert calls == (1,)  # the failed call only
