"""The state machines refuse every transition docs/design.md §3 does not list."""

from __future__ import annotations

import itertools

import pytest

from core.errors import IllegalTransition
from core.states import (
    DRAFT_TRANSITIONS,
    RUN_TRANSITIONS,
    DraftState,
    EffectState,
    RunState,
    check_draft,
    check_effect,
    check_run,
    run_may_move,
)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (RunState.PENDING, RunState.SUCCEEDED),
        (RunState.RUNNING, RunState.PUBLISHING),
        (RunState.AWAITING_REVIEW, RunState.SUCCEEDED),
        (RunState.SUCCEEDED, RunState.PUBLISHING),
        (RunState.REJECTED, RunState.APPROVED),
    ],
)
def test_illegal_run_transitions_raise(current: RunState, target: RunState) -> None:
    with pytest.raises(IllegalTransition):
        check_run(current, target)


def test_the_happy_path_is_legal() -> None:
    path = [
        RunState.PENDING,
        RunState.RUNNING,
        RunState.AWAITING_REVIEW,
        RunState.APPROVED,
        RunState.PUBLISHING,
        RunState.SUCCEEDED,
    ]
    for current, target in itertools.pairwise(path):
        check_run(current, target)
    check_run(RunState.APPROVED, RunState.SUCCEEDED)  # no publish target


def test_terminal_drafts_never_change() -> None:
    for state in (DraftState.REJECTED, DraftState.EXPIRED, DraftState.SUPERSEDED):
        assert DRAFT_TRANSITIONS[state] == set()
        with pytest.raises(IllegalTransition):
            check_draft(state, DraftState.READY)
    check_draft(DraftState.APPROVED, DraftState.READY)  # a stale approval goes back


def test_a_succeeded_effect_is_final() -> None:
    for target in EffectState:
        with pytest.raises(IllegalTransition):
            check_effect(EffectState.SUCCEEDED, target)


def test_every_state_has_a_row_in_the_tables() -> None:
    assert set(RUN_TRANSITIONS) == set(RunState)
    assert set(DRAFT_TRANSITIONS) == set(DraftState)


def test_a_run_may_move_exactly_where_check_run_lets_it() -> None:
    for current, target in itertools.product(RunState, RunState):
        try:
            check_run(current, target)
        except IllegalTransition:
            assert not run_may_move(current, target)
        else:
            assert run_may_move(current, target)
