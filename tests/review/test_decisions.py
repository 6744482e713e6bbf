"""What a decision sets going: `decide` says whether an approval publishes, so
every surface (a Slack button, the notebook) follows one rule. On both backends."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from core.drafting.service import DraftingService
from core.models import RunRow
from core.policies import FollowUp, Refusal, Verdict
from core.review.queue import decide
from core.setup.config import parse_config
from core.slots.schedule import slot_at_wall
from core.states import RunState
from core.store.engine import Store
from core.store.rows import run_row
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text

SLOTS = ["2026-11-02T09:00", "2026-11-09T09:00"]
WEBHOOK = 'publish = { to = "webhook", url = "http://127.0.0.1:9/hook" }'


def _config(publish: str | None) -> str:
    text = config_text(pending_limit=10)
    if publish is None:
        return text
    return re.sub(r"^(prompt = .*)$", lambda m: f"{m.group(1)}\n{publish}", text, flags=re.M)


def _draft(store: Store, clock: FrozenClock, wall: str) -> str:
    recipe = parse_config(_config(None)).recipes["weekly-update"]
    drafting = DraftingService(store, InstantDrafter(), clock=clock, worker="w1")
    result = drafting.draft_slot(recipe, slot_at_wall(recipe, datetime.fromisoformat(wall)))
    assert result.key is not None, result
    return result.key


def _state(store: Store, run_id: str) -> str:
    with store.read() as session:
        row = run_row(session, run_id)
        assert isinstance(row, RunRow)
        return row.state


@pytest.mark.parametrize(
    ("publish", "verdict", "follow_up", "run_state"),
    [
        (WEBHOOK, Verdict.APPROVED, FollowUp.PUBLISH, RunState.APPROVED),
        (None, Verdict.APPROVED, FollowUp.NONE, RunState.SUCCEEDED),
        (WEBHOOK, Verdict.REJECTED, FollowUp.NONE, RunState.REJECTED),
    ],
)
def test_only_an_approval_with_a_publish_target_publishes(
    store: Store, publish: str | None, verdict: Verdict, follow_up: FollowUp, run_state: str
) -> None:
    clock = FrozenClock(datetime.fromisoformat("2026-11-02T09:05:00+00:00"))
    key = _draft(store, clock, SLOTS[0])
    config = parse_config(_config(publish))

    answer = decide(
        store, config, clock, draft_key=key, revision=1, verdict=verdict, user="U1", permitted=True
    )

    assert answer.accepted and answer.follow_up == follow_up
    assert answer.item is not None and _state(store, answer.item.run_id) == run_state


def test_a_refusal_says_why_in_a_value_and_names_who_decided_first(store: Store) -> None:
    clock = FrozenClock(datetime.fromisoformat("2026-11-02T09:05:00+00:00"))
    key, config = _draft(store, clock, SLOTS[0]), parse_config(_config(WEBHOOK))

    def click(user: str, *, permitted: bool = True) -> tuple[Refusal | None, FollowUp, str]:
        answer = decide(
            store,
            config,
            clock,
            draft_key=key,
            revision=1,
            verdict=Verdict.APPROVED,
            user=user,
            permitted=permitted,
        )
        return answer.refusal, answer.follow_up, answer.message

    assert click("U2", permitted=False)[0] == Refusal.NOT_APPROVER
    assert click("U1")[:2] == (None, FollowUp.PUBLISH)
    assert click("U2") == (Refusal.DECIDED, FollowUp.NONE, "Already approved by U1.")
