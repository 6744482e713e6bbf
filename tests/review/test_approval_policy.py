"""The approval policy (docs/design.md §22): `approvals_required` distinct
people of one exact revision decide; an edit starts the count again; with
`editor_may_approve = false` the editor does not count; a rejection decides at once.
On both backends; assertions on rows and on the message a reviewer would see."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa
from sqlmodel import col, select

from bot.blocks import draft_message
from bot.review_facts import fact_lines
from core.drafting.service import DraftingService
from core.errors import ConfigError
from core.models import ApprovalRow, EventRow
from core.policies import Refusal, Verdict
from core.review.facts import annotate
from core.review.queue import ReviewAnswer, decide, edit, load_item
from core.setup.config import Config, parse_config
from core.slots.schedule import slot_at_wall
from core.states import DraftState
from core.store.engine import Store
from core.store.rows import draft_row
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text
from tests.harness.races import two_clicks_at_once

WALL = "2026-11-02T09:00"
ANA, BEN, CAL = "U0ANA", "U0BEN", "U0CAL"


def config(*defaults: str, approvers: str = "") -> Config:
    text = config_text(pending_limit=10).replace(
        "[defaults]\n", "[defaults]\n" + "\n".join(defaults) + "\n"
    )
    if approvers:
        text = text.replace(
            'review_channel = "C0REVIEW"', f'review_channel = "C0REVIEW"\n{approvers}'
        )
    return parse_config(text)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime.fromisoformat("2026-11-02T09:05:00+00:00"))


def drafted(store: Store, clock: FrozenClock, cfg: Config) -> str:
    recipe = cfg.recipes["weekly-update"]
    drafting = DraftingService(store, InstantDrafter(), clock=clock, worker="w1")
    result = drafting.draft_slot(recipe, slot_at_wall(recipe, datetime.fromisoformat(WALL)))
    assert result.key is not None, result
    return result.key


def approve(
    store: Store, cfg: Config, clock: FrozenClock, key: str, user: str, revision: int = 1
) -> ReviewAnswer:
    return decide(
        store,
        cfg,
        clock,
        draft_key=key,
        revision=revision,
        verdict=Verdict.APPROVED,
        user=user,
        permitted=True,
    )


def edited(
    store: Store, cfg: Config, clock: FrozenClock, key: str, user: str, revision: int = 1
) -> None:
    answer = edit(
        store,
        cfg,
        clock,
        draft_key=key,
        revision=revision,
        text=f"Edited by {user}.",
        user=user,
        permitted=True,
    )
    assert answer.accepted, answer


def state_of(store: Store, key: str) -> DraftState:
    with store.read() as session:
        row = draft_row(session, key)
        assert row is not None
        return DraftState(row.state)


def approvals(store: Store, key: str) -> list[tuple[int, str]]:
    with store.read() as session:
        rows = session.exec(select(ApprovalRow).where(col(ApprovalRow.draft_key) == key)).all()
        return sorted((r.revision, r.approver) for r in rows)


def approved_events(store: Store, key: str) -> int:
    with store.read() as session:
        return int(
            session.exec(
                select(sa.func.count())
                .select_from(EventRow)
                .where(
                    col(EventRow.subject_id) == key, col(EventRow.to_state) == DraftState.APPROVED
                )
            ).one()
        )


def test_two_approvers_clicking_at_once_approve_once_and_both_are_named(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config("approvals_required = 2")
    key = drafted(store, clock, cfg)
    answers = two_clicks_at_once(lambda user: approve(store, cfg, clock, key, user), ANA, BEN)

    assert all(a.accepted for a in answers.values()), answers
    assert state_of(store, key) == DraftState.APPROVED
    assert approved_events(store, key) == 1
    assert approvals(store, key) == [(1, ANA), (1, BEN)]
    decided = load_item(store, key)
    assert decided is not None
    item = annotate(store, cfg, clock.now(), decided)
    _, blocks = draft_message(item, fact_lines(item))
    shown = str(blocks)
    assert f"<@{ANA}>" in shown and f"<@{BEN}>" in shown and "Approved" in shown


def test_the_same_person_approving_twice_counts_once(store: Store, clock: FrozenClock) -> None:
    cfg = config("approvals_required = 2")
    key = drafted(store, clock, cfg)

    first, second = approve(store, cfg, clock, key, ANA), approve(store, cfg, clock, key, ANA)

    assert first.accepted and "1 of 2" in first.message
    assert (second.accepted, second.refusal) == (False, Refusal.ALREADY_APPROVED)
    assert state_of(store, key) == DraftState.READY
    assert approvals(store, key) == [(1, ANA)]


def test_an_edit_between_two_approvals_starts_the_count_again(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config("approvals_required = 2")
    key = drafted(store, clock, cfg)
    assert approve(store, cfg, clock, key, ANA).accepted

    edited(store, cfg, clock, key, CAL)
    stale = approve(store, cfg, clock, key, BEN, revision=1)
    fresh = approve(store, cfg, clock, key, BEN, revision=2)

    assert stale.refusal == Refusal.EDITED
    assert fresh.accepted and "1 of 2" in fresh.message
    assert state_of(store, key) == DraftState.READY  # ANA's approval was of revision 1
    assert approve(store, cfg, clock, key, ANA, revision=2).accepted
    assert state_of(store, key) == DraftState.APPROVED


def test_the_editor_is_refused_with_the_reason_when_editors_may_not_approve(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config("editor_may_approve = false")
    key = drafted(store, clock, cfg)
    edited(store, cfg, clock, key, ANA)

    refused = approve(store, cfg, clock, key, ANA, revision=2)

    assert (refused.accepted, refused.refusal) == (False, Refusal.EDITOR_MAY_NOT_APPROVE)
    assert "editor_may_approve" in refused.message
    assert state_of(store, key) == DraftState.READY and approvals(store, key) == []
    assert approve(store, cfg, clock, key, BEN, revision=2).accepted
    assert state_of(store, key) == DraftState.APPROVED


def test_the_editor_counts_by_default(store: Store, clock: FrozenClock) -> None:
    cfg = config()
    key = drafted(store, clock, cfg)
    edited(store, cfg, clock, key, ANA)
    assert approve(store, cfg, clock, key, ANA, revision=2).accepted
    assert state_of(store, key) == DraftState.APPROVED


def test_a_rejection_decides_at_once_whatever_approvals_came_first(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config("approvals_required = 3")
    key = drafted(store, clock, cfg)
    assert approve(store, cfg, clock, key, ANA).accepted

    rejected = decide(
        store,
        cfg,
        clock,
        draft_key=key,
        revision=1,
        verdict=Verdict.REJECTED,
        user=BEN,
        permitted=True,
    )

    assert rejected.accepted and state_of(store, key) == DraftState.REJECTED


def test_the_message_shows_progress_and_who_may_still_approve(
    store: Store, clock: FrozenClock
) -> None:
    cfg = config("approvals_required = 2", approvers=f'approvers = ["{ANA}", "{BEN}", "S0EDITORS"]')
    key = drafted(store, clock, cfg)
    answer = approve(store, cfg, clock, key, ANA)
    assert answer.item is not None

    lines = fact_lines(annotate(store, cfg, clock.now(), answer.item))

    [progress] = [line for line in lines if "Approvals" in line]
    assert f"1 of 2: <@{ANA}>" in progress
    assert f"may still approve: <@{BEN}>, S0EDITORS" in progress  # a group, never pinged


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("approvals_required = 0", "approvals_required: must be at least 1"),
        ('approvals_required = "2"', "approvals_required: want a whole number"),
        ('editor_may_approve = "no"', "editor_may_approve: want true or false"),
        ("max_redrafts = -1", "max_redrafts: must be at least 0"),
    ],
)
def test_the_reviewer_loop_settings_are_validated_strictly(line: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config(line)
    assert any(says in problem for problem in raised.value.problems), raised.value.problems


def test_more_approvals_than_listed_approvers_is_refused() -> None:
    with pytest.raises(ConfigError) as raised:
        config("approvals_required = 3", approvers=f'approvers = ["{ANA}", "{BEN}"]')
    assert any("approvals_required: 3 approvals needed" in p for p in raised.value.problems)
