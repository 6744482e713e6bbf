"""A draft that does not fit a target cannot be approved, and says why (docs/design.md
§24): through core (the notebook's `approve`, which the CLI and Slack share) and through
the real Slack harness, whose review message shows each target's count. The model is
told the tightest limit of the recipe's targets in its request.

Bluesky counts graphemes locally, so its target needs no server here: nothing is sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.drafting.fit import FitRule, refusal, tightest
from core.policies import Refusal, Verdict
from core.ports import Fit
from core.review.queue import decide
from core.states import DraftState, RunState
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.harness.slack_harness import APPROVE, KEY, RUN, StartBot, eventually
from tests.harness.worlds import MakeWorld

BLUESKY = (
    'publish = { to = "bluesky", handle = "acme.bsky.social", service = "http://127.0.0.1:9" }'
)
BOTH = (
    'publish = [{ to = "linkedin", author = "urn:li:organization:1", api = "http://127.0.0.1:9" },'
    ' { to = "bluesky", handle = "acme.bsky.social", service = "http://127.0.0.1:9" }]'
)
TOO_LONG = "A week of shipping. " * 16  # 320 characters: over Bluesky's 300
SHORT = "A week of shipping."


def test_the_refusal_names_each_target_over_its_limit_with_its_counts() -> None:
    fits = [Fit("bluesky:a", "Bluesky", 320, 300), Fit("linkedin:b", "LinkedIn", 320, 3000)]
    assert refusal(fits) == (
        "Too long for Bluesky: 320/300. Edit or redraft it to fit before approving."
    )
    assert refusal(fits[1:]) is None
    assert tightest(fits) == fits[0]


def test_a_draft_over_a_targets_limit_cannot_be_approved_through_core(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    world = worlds(db_url, publish=BOTH)
    fake_anthropic.script(ok(text=TOO_LONG))
    key = world.draft()
    answer = world.galley.approve(key, revision=1, user="U0EDITOR")
    assert not answer.accepted
    assert answer.message == (
        "Too long for Bluesky: 320/300. Edit or redraft it to fit before approving."
    )
    assert world.draft_row(key).state == DraftState.READY  # still open: Edit, Redraft
    assert world.run_row().state == RunState.AWAITING_REVIEW
    edited = world.galley.edit(key, SHORT, revision=1, user="U0EDITOR")
    assert edited.accepted  # Edit stays open
    assert world.galley.approve(key, revision=2, user="U0EDITOR").accepted
    assert world.draft_row(key).state == DraftState.APPROVED


def test_the_model_is_told_the_tightest_limit_of_the_recipes_targets(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    world = worlds(db_url, publish=BOTH)
    world.draft()
    [request] = [r for r in fake_anthropic.requests if r.path.endswith("/messages")]
    system = request.body["system"]
    text = system if isinstance(system, str) else " ".join(part["text"] for part in system)
    assert "at most 300 characters" in text and "Bluesky" in text
    assert "3000" not in text  # LinkedIn's is not the tightest


def test_a_redraft_is_told_the_tightest_limit_as_the_first_draft_was(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    """ "Edit or redraft it to fit" is what a refused approval says: the redraft's request
    must know the limit it is to fit."""
    world = worlds(db_url, publish=BOTH)
    fake_anthropic.script(ok(text=TOO_LONG))
    key = world.draft()
    answer = world.galley.redraft(key, "shorter", revision=1, user="U0EDITOR")
    assert answer.accepted, answer
    *_, request = [r for r in fake_anthropic.requests if r.path.endswith("/messages")]
    system = request.body["system"]
    text = system if isinstance(system, str) else " ".join(part["text"] for part in system)
    assert "at most 300 characters" in text and "Bluesky" in text
    assert "<reviewer_note>" in request.body["messages"][0]["content"]


def test_fit_rule_skips_targets_without_a_limit() -> None:
    class NoLimit:
        target = "webhook"

        def fit(self, text: str) -> None:
            return None

    rule = FitRule(lambda recipe: [NoLimit()])  # type: ignore[list-item]
    recipe: Any = None
    assert rule.measure(recipe, "x" * 10_000) == ()
    assert rule.check(recipe, "x").reason is None


def test_slack_shows_each_targets_count_and_refuses_the_approve_with_the_reason(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GALLEY_BLUESKY_PASSWORD", "app-pass")  # else the bot refuses to start
    h = start_bot(db_url, slack='approvers = ["U0EDITOR"]', publish=BLUESKY)
    fake_anthropic.script(ok(text=TOO_LONG))
    _, message = h.draft_and_post()
    shown = str(message["blocks"])
    assert "Bluesky 320/300 ✗" in shown  # the count, right above the buttons
    assert h.click(APPROVE, "U0EDITOR").status_code == 200
    [reply] = eventually(lambda: h.replies("U0EDITOR"), "the refusal")
    assert "Too long for Bluesky: 320/300" in reply
    assert h.draft_row().state == DraftState.READY
    assert h.draft_events(DraftState.APPROVED) == []
    run = h.run_row(RUN)
    assert run is not None and run.state == RunState.AWAITING_REVIEW
    [actions] = [b for b in h.message_for(KEY)["blocks"] if b["type"] == "actions"]
    assert "Edit" in str(actions)  # the buttons stay: Edit is open


def test_a_text_edited_while_it_was_measured_is_not_approved_unmeasured(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    """The measure runs outside the decision's transaction (it may ask a destination): an
    edit landing in between makes the click's revision current with a text nobody
    measured. The decision compares the measured text's hash and refuses."""
    world = worlds(db_url, publish=BLUESKY)
    fake_anthropic.script(ok(text=SHORT))
    key = world.draft()

    class EditsWhileMeasuring:
        target = "bluesky:acme.bsky.social"

        def fit(self, text: str) -> Fit:
            if world.draft_row(key).revision == 1:  # an editor saves revision 2 meanwhile
                assert world.galley.edit(key, TOO_LONG, revision=1, user="U0EDITOR").accepted
            return Fit(self.target, "Bluesky", len(text), 300)

    rule = FitRule(lambda recipe: [EditsWhileMeasuring()])  # type: ignore[list-item]
    answer = decide(
        world.store,
        world.config,
        world.clock,
        draft_key=key,
        revision=2,  # the click names the revision that is current by the time it decides
        verdict=Verdict.APPROVED,
        user="U0EDITOR",
        permitted=True,
        fits=rule,
    )
    assert not answer.accepted and answer.refusal == Refusal.EDITED
    assert world.draft_row(key).state == DraftState.READY
