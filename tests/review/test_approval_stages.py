"""Approval stages (docs/design.md §22, issue 41.1): a revision passes the recipe's
`approval_stages` in order; an approval for a stage not reached is refused, naming the
stage waiting; an edit starts again at the first stage; a rejection at any stage
decides; `editor_may_approve` holds in every stage; the approval counts from the last
stage. On both backends; assertions on rows and on the message a reviewer would see."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta

import pytest
from sqlmodel import col, select

from bot.blocks import decided_message
from bot.review_facts import fact_lines
from core.api.decisions import read_decisions
from core.errors import ConfigError
from core.failpoints import hook
from core.models import ApprovalRow
from core.policies import Refusal, Verdict
from core.review.facts import annotate
from core.review.queue import ReviewAnswer, decide, edit
from core.setup.config import Config
from core.states import DraftState
from core.store.engine import Store
from core.store.rows import draft_row
from core.testing import FrozenClock
from tests.harness.races import two_clicks_at_once
from tests.harness.slack_harness import APPROVE, PEOPLE, StartBot, eventually
from tests.harness.worlds import KEY, MakeWorld
from tests.review.test_approval_policy import approve, config, drafted, edited, state_of
from tests.review.test_reminders import REMIND, after, remind, replies, waiting

ANA, BEN, CAL, DAN = "U0ANA", "U0BEN", "U0CAL", "U0DAN"
TWO_STAGES = (
    f'approval_stages = [{{ name = "editor", approvers = ["{ANA}", "{BEN}"], required = 1 }}, '
    f'{{ name = "legal", approvers = ["{CAL}", "{DAN}"], required = 1 }}]'
)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime.fromisoformat("2026-11-02T09:05:00+00:00"))


def staged(*more: str) -> Config:
    return config(TWO_STAGES, *more)


def approvals_by_stage(store: Store, key: str) -> list[tuple[int, str, str]]:
    with store.read() as session:
        rows = session.exec(select(ApprovalRow).where(col(ApprovalRow.draft_key) == key)).all()
        return sorted((r.revision, r.stage, r.approver) for r in rows)


def reject(store: Store, cfg: Config, clock: FrozenClock, key: str, user: str) -> ReviewAnswer:
    return decide(
        store,
        cfg,
        clock,
        draft_key=key,
        revision=1,
        verdict=Verdict.REJECTED,
        user=user,
        permitted=True,
        reason="not this week",
    )


def test_a_revision_passes_the_stages_in_order(store: Store, clock: FrozenClock) -> None:
    cfg = staged()
    key = drafted(store, clock, cfg)

    first = approve(store, cfg, clock, key, ANA)
    assert first.accepted, first
    assert state_of(store, key) == DraftState.READY
    assert first.item is not None and first.item.approvals is not None
    assert (first.item.approvals.stage_number, first.item.approvals.stage) == (2, "legal")

    assert approve(store, cfg, clock, key, CAL).accepted
    assert state_of(store, key) == DraftState.APPROVED
    assert approvals_by_stage(store, key) == [(1, "editor", ANA), (1, "legal", CAL)]


def test_an_approval_for_a_stage_not_reached_is_refused_naming_the_stage_waiting(
    store: Store, clock: FrozenClock
) -> None:
    cfg = staged()
    key = drafted(store, clock, cfg)

    early = approve(store, cfg, clock, key, CAL)

    assert early.refusal == Refusal.STAGE_WAITING
    assert "Stage 1 of 2 (editor) is waiting" in early.message
    assert approvals_by_stage(store, key) == []
    assert state_of(store, key) == DraftState.READY


def test_an_edit_between_stages_starts_again_at_the_first(store: Store, clock: FrozenClock) -> None:
    cfg = staged()
    key = drafted(store, clock, cfg)
    assert approve(store, cfg, clock, key, ANA).accepted
    edited(store, cfg, clock, key, BEN)

    legal = approve(store, cfg, clock, key, CAL, revision=2)

    assert legal.refusal == Refusal.STAGE_WAITING, legal
    assert "Stage 1 of 2 (editor)" in legal.message
    assert approve(store, cfg, clock, key, ANA, revision=2).accepted
    assert approve(store, cfg, clock, key, CAL, revision=2).accepted
    assert state_of(store, key) == DraftState.APPROVED


def test_a_rejection_at_the_second_stage_decides(store: Store, clock: FrozenClock) -> None:
    cfg = staged()
    key = drafted(store, clock, cfg)
    assert approve(store, cfg, clock, key, ANA).accepted

    assert reject(store, cfg, clock, key, CAL).accepted

    assert state_of(store, key) == DraftState.REJECTED


def test_the_editor_may_not_approve_at_the_second_stage_either(
    store: Store, clock: FrozenClock
) -> None:
    cfg = staged("editor_may_approve = false")
    key = drafted(store, clock, cfg)
    edited(store, cfg, clock, key, CAL)
    assert approve(store, cfg, clock, key, ANA, revision=2).accepted

    barred = approve(store, cfg, clock, key, CAL, revision=2)

    assert barred.refusal == Refusal.EDITOR_MAY_NOT_APPROVE
    assert approve(store, cfg, clock, key, DAN, revision=2).accepted
    assert state_of(store, key) == DraftState.APPROVED


def test_the_approval_counts_from_the_last_stage(store: Store, clock: FrozenClock) -> None:
    cfg = staged()
    key = drafted(store, clock, cfg)
    assert approve(store, cfg, clock, key, ANA).accepted
    clock.advance(timedelta(hours=3))

    assert approve(store, cfg, clock, key, CAL).accepted

    with store.read() as session:
        row = draft_row(session, key)
        assert row is not None
        assert (row.decided_by, row.decided_at) == (CAL, clock.now())


def test_the_message_names_the_stage_who_approved_and_who_is_asked(
    store: Store, clock: FrozenClock
) -> None:
    cfg = staged()
    key = drafted(store, clock, cfg)
    answer = approve(store, cfg, clock, key, ANA)
    assert answer.item is not None

    lines = fact_lines(annotate(store, cfg, clock.now(), answer.item))

    [progress] = [line for line in lines if "Stage" in line]
    assert f"Stage 2 of 2 (legal): approved by editor <@{ANA}>; asking <@{CAL}>, <@{DAN}>" in (
        progress
    )


def test_the_approved_message_names_who_approved_at_every_stage(
    store: Store, clock: FrozenClock
) -> None:
    """The final message replaces the buttons with who approved: the first stage's
    approver too, not only the one who decided at the last."""
    cfg = staged()
    key = drafted(store, clock, cfg)
    assert approve(store, cfg, clock, key, ANA).accepted
    answer = approve(store, cfg, clock, key, CAL)
    assert answer.item is not None and state_of(store, key) == DraftState.APPROVED

    _, blocks = decided_message(annotate(store, cfg, clock.now(), answer.item))

    [decision] = [b for b in blocks if b.get("block_id") == "galley_decision"]
    said = decision["elements"][0]["text"]
    assert said.startswith(f"✅ Approved by editor <@{ANA}>; legal <@{CAL}>")


def test_approvers_of_two_stages_clicking_at_once_pass_them_in_order(
    store: Store, clock: FrozenClock
) -> None:
    """The editor's approval is counted and held inside its transaction while the lawyer
    clicks: the draft's lock keeps the lawyer out until stage 1 has committed, so the
    lawyer's approval lands at stage 2 and decides; without the lock it would be judged
    against no approvals and refused."""
    cfg = staged()
    key = drafted(store, clock, cfg)
    answers = two_clicks_at_once(lambda user: approve(store, cfg, clock, key, user), ANA, CAL)

    assert all(a.accepted for a in answers.values()), answers
    assert state_of(store, key) == DraftState.APPROVED
    assert approvals_by_stage(store, key) == [(1, "editor", ANA), (1, "legal", CAL)]


def test_an_edit_while_the_last_stage_approves_waits_and_is_refused(
    store: Store, clock: FrozenClock
) -> None:
    """The lawyer's approval, the last stage's, is held inside its transaction while an
    editor saves an edit: the draft's lock keeps the edit out until the approval has
    committed, so the draft is approved exactly as approved and the edit is refused."""
    cfg = staged()
    key = drafted(store, clock, cfg)
    assert approve(store, cfg, clock, key, ANA).accepted
    inside, edit_tried = threading.Event(), threading.Event()

    def hold_the_approval() -> None:
        inside.set()
        edit_tried.wait(timeout=2.0)

    answers: dict[str, ReviewAnswer] = {}

    def approve_last() -> None:
        answers["approval"] = approve(store, cfg, clock, key, CAL)

    def save_edit() -> None:
        assert inside.wait(timeout=30)
        answers["edit"] = edit(
            store, cfg, clock, draft_key=key, revision=1, text="Late.", user=BEN, permitted=True
        )
        edit_tried.set()

    with hook("after_approval_counted", hold_the_approval):
        threads = [threading.Thread(target=approve_last), threading.Thread(target=save_edit)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)

    assert answers["approval"].accepted, answers
    assert answers["edit"].refusal == Refusal.DECIDED, answers
    assert state_of(store, key) == DraftState.APPROVED
    with store.read() as session:
        row = draft_row(session, key)
        assert row is not None and (row.revision, row.text) != (2, "Late.")


def test_the_decision_log_names_each_approval_s_stage(store: Store, clock: FrozenClock) -> None:
    cfg = staged()
    key = drafted(store, clock, cfg)
    assert approve(store, cfg, clock, key, ANA).accepted
    clock.advance(timedelta(minutes=1))
    assert approve(store, cfg, clock, key, CAL).accepted

    with store.read() as session:
        logged = read_decisions(session, cfg)

    assert [(d.decision, d.who, d.stage, d.outcome) for d in reversed(logged)] == [
        ("approval", ANA, "editor", "counted"),
        ("approval", CAL, "legal", "approved"),
    ]
    # the next stage has nobody yet: no empty parentheses where names would be
    assert (
        logged[-1].reason
        == "Approval counted: stage 2 of 2 (legal), 0 of 1; approved by editor U0ANA."
    )


def test_the_decision_log_names_the_stage_a_rejection_was_given_at(
    store: Store, clock: FrozenClock
) -> None:
    cfg = staged()
    key = drafted(store, clock, cfg)
    assert approve(store, cfg, clock, key, ANA).accepted
    clock.advance(timedelta(minutes=1))
    assert reject(store, cfg, clock, key, CAL).accepted

    with store.read() as session:
        logged = read_decisions(session, cfg)

    assert [(d.decision, d.who, d.stage) for d in reversed(logged)] == [
        ("approval", ANA, "editor"),
        ("rejection", CAL, "legal"),
    ]


def test_a_reminder_pings_the_approvers_of_the_stage_waiting(
    worlds: MakeWorld, db_url: str
) -> None:
    stages = (
        'approval_stages = [{ name = "editor", approvers = ["U0EDITOR", "S0EDITORS"] }, '
        '{ name = "legal", approvers = ["U0LAWYER"] }]'
    )
    world = waiting(worlds, db_url, defaults=f"{REMIND}\n{stages}")
    passed = decide(
        world.store,
        world.config,
        world.clock,
        draft_key=KEY,
        revision=1,
        verdict=Verdict.APPROVED,
        user="U0EDITOR",
        permitted=True,
    )
    assert passed.accepted, passed
    after(world, 4.1)

    assert remind(world) == 1

    [sent] = replies(world)
    assert "<@U0LAWYER>" in sent["text"]
    assert "U0EDITOR" not in sent["text"] and "S0EDITORS" not in sent["text"]


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        ((TWO_STAGES, "approvals_required = 2"), "either approval_stages or approvals_required"),
        (
            ('approval_stages = [{ name = "a", approvers = ["U0ANA"] }, { name = "a" }]',),
            "stage 'a' named twice",
        ),
        (
            ('approval_stages = [{ name = "a", approvers = ["U0ANA"], required = 2 }]',),
            "stage 'a' needs 2 approvals but names only 1",
        ),
    ],
)
def test_the_stages_are_validated(lines: tuple[str, ...], says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config(*lines)
    assert any(says in problem for problem in raised.value.problems), raised.value.problems


def test_a_stage_approver_slack_does_not_list_is_accepted() -> None:
    cfg = config(TWO_STAGES, approvers=f'approvers = ["{ANA}", "{BEN}", "{CAL}"]')
    assert [s.name for s in cfg.recipes["weekly-update"].approval_stages] == ["editor", "legal"]


LAWYER_ONLY_AT_LEGAL = (
    'approval_stages = [{ name = "editor" }, { name = "legal", approvers = ["U0LAWYER"] }]'
)


def test_a_stage_approver_not_in_slack_approvers_approves_their_stage_by_a_click(
    start_bot: StartBot, db_url: str
) -> None:
    """U0LAWYER is named by the legal stage only, not by `[slack] approvers`: the message
    asks them, and their Approve passes that stage and approves the draft. At the editor
    stage (naming nobody: `[slack] approvers`) their click is refused, naming the stage."""
    h = start_bot(db_url, slack=PEOPLE, defaults=LAWYER_ONLY_AT_LEGAL)
    key, _ = h.draft_and_post()

    assert h.click(APPROVE, "U0LAWYER", key).status_code == 200
    [early] = eventually(lambda: h.replies("U0LAWYER"), "the lawyer's early click refused")
    assert "Stage 1 of 2 (editor) is waiting" in early
    assert approvals_by_stage(h.store, key) == []

    assert h.click(APPROVE, "U0EDITOR", key).status_code == 200
    eventually(lambda: approvals_by_stage(h.store, key), "the editor's approval")
    h.bot.sync_slack()
    assert "asking <@U0LAWYER>" in json.dumps(h.message_for(key)["blocks"]), h.message_for(key)

    assert h.click(APPROVE, "U0LAWYER", key).status_code == 200
    eventually(lambda: h.draft_row(key).state == DraftState.APPROVED, "the lawyer's approval")
    assert h.draft_row(key).decided_by == "U0LAWYER"
    assert approvals_by_stage(h.store, key) == [(1, "editor", "U0EDITOR"), (1, "legal", "U0LAWYER")]
    assert h.replies("U0LAWYER") == [early]  # the second click was not refused
