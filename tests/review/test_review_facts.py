"""What a reviewer sees about repeats and about the recipe: end to end with a real `Bot`
against the fake Slack and Anthropic APIs over HTTP, and the pure rendering.

The fake Anthropic server answers with a rewording of a post already published; the
review message must say so above its buttons, linked to the publication, and with
`on_similar = "redraft"` there must be one extra model call and still one message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

from bot.block_kit import BLOCK_LIMIT
from bot.blocks import review_message
from bot.review_facts import record_line, similar_line
from bot.run import Bot
from core.drafting_policies import DraftOutcome
from core.models import AttemptRow, DraftRow
from core.ports import MessageRef, RecipeRecord, ReviewItem, SimilarPost
from core.states import DraftState, RunState
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.slack_api import FakeSlack
from tests.harness import bots, rows
from tests.harness.approvals import approve
from tests.harness.bots import operator
from tests.harness.posts import FRESH, REWORDED, SEEN

SECRET = "8f742231b10e8888abcd99yyyzzz85a5-galley-facts"
REVIEW, ANNOUNCE = "C0REVIEW", "C0ANNOUNCE"
WORKSPACE = "https://galley-test.slack.com"  # what the fake's auth.test answers
RECIPE = "weekly-update"
EARLIER, LATER = "2026-11-16T09:00", "2026-11-23T09:00"  # Mondays before bots.BOT_EPOCH
EARLIER_KEY = f"linkedin|{RECIPE}@{EARLIER}|v1"
LATER_KEY = f"linkedin|{RECIPE}@{LATER}|v1"
WHEN = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)


@dataclass
class Running:
    bot: Bot
    slack: FakeSlack
    anthropic: FakeAnthropic
    store: Store

    def draft(self, slot: str, *texts: str) -> None:
        self.anthropic.script(*(ok(text=t) for t in texts))
        assert operator(self.bot).draft(RECIPE, slot).outcome == DraftOutcome.DRAFTED
        self.bot.sync_slack()

    def approve_and_publish(self, key: str) -> None:
        galley = self.bot.core
        answer = approve(galley.store, galley.config, galley.clock, key)
        assert answer.accepted, answer.message
        self.bot.reconcile()  # the periodic pass publishes approved runs

    def review_posts(self, key: str) -> list[dict[str, Any]]:
        """Every chat.postMessage of a review message for `key`, as Slack received it."""
        return [
            c.params
            for c in self.slack.calls("chat.postMessage")
            if (c.params.get("metadata") or {}).get("event_payload", {}).get("draft_key") == key
        ]

    def draft_row(self, key: str) -> DraftRow:
        return rows.draft_row(self.store, key)


Start = Callable[..., Running]


@pytest.fixture
def start(tmp_path: Path, fake_anthropic: FakeAnthropic) -> Iterator[Start]:
    with bots.running_bots(tmp_path, fake_anthropic.url, SECRET) as start_running:

        def run(db_url: str, defaults: str = "") -> Running:
            text = config_text()
            publish = f'publish = {{ to = "slack", channel = "{ANNOUNCE}" }}'
            text = re.sub(
                r"^(prompt = .*)$", lambda m: f"{m.group(1)}\n{publish}", text, flags=re.M
            )
            text = text.replace("[defaults]\n", f"[defaults]\n{defaults}\n")
            running = start_running(text, db_url)
            return Running(running.bot, running.slack, fake_anthropic, running.store)

        yield run


def lines_above_buttons(blocks: list[dict[str, Any]]) -> list[str]:
    """The texts of the context blocks between the draft's details and the buttons."""
    [actions_at] = [i for i, b in enumerate(blocks) if b["type"] == "actions"]
    details_at = next(i for i, b in enumerate(blocks) if b["type"] == "context")
    return [b["elements"][0]["text"] for b in blocks[details_at + 1 : actions_at]]


# --- end to end ----------------------------------------------------------------------------


def test_a_reworded_post_is_flagged_above_the_buttons_with_a_link_to_the_publication(
    start: Start, db_url: str
) -> None:
    h = start(db_url)
    h.draft(EARLIER, SEEN)
    [first] = h.review_posts(EARLIER_KEY)
    fit, *facts = lines_above_buttons(first["blocks"])
    # the target's count (docs/design.md §24)
    assert fit.startswith("Slack ") and fit.endswith("/12000")
    assert facts == [f":bar_chart: *{RECIPE}*, no decisions in the last 30 days"]
    h.approve_and_publish(EARLIER_KEY)
    [publication] = h.slack.messages(ANNOUNCE)

    h.draft(LATER, REWORDED)

    [post] = h.review_posts(LATER_KEY)
    score = h.draft_row(LATER_KEY).similar_score
    link = f"{WORKSPACE}/archives/{ANNOUNCE}/p{publication['ts'].replace('.', '')}"
    _, warning, record = lines_above_buttons(post["blocks"])
    assert warning.startswith(f":warning: *{score}% similar* to <{link}|the post published> on ")
    assert record == f":bar_chart: *{RECIPE}*, last 30 days: 1 of 1 approved (100%)"
    assert len(h.anthropic.requests) == 2


def test_redraft_makes_one_extra_model_call_and_still_one_review_message(
    start: Start, db_url: str
) -> None:
    h = start(db_url, 'on_similar = "redraft"')
    h.draft(EARLIER, SEEN)
    h.approve_and_publish(EARLIER_KEY)

    h.draft(LATER, REWORDED, FRESH)
    h.bot.sync_slack()

    assert len(h.anthropic.requests) == 3  # one for the earlier week, two for this one
    assert SEEN in h.anthropic.requests[-1].body["messages"][0]["content"]
    [post] = h.review_posts(LATER_KEY)
    assert "Our support team now answers in Portuguese" in str(post["blocks"])
    assert not any("similar" in line for line in lines_above_buttons(post["blocks"]))
    with h.store.transaction() as session:
        attempts = session.exec(select(AttemptRow).where(col(AttemptRow.draft_key) == LATER_KEY))
        assert [a.redraft for a in attempts] == [False, True]
    draft = h.draft_row(LATER_KEY)
    assert (draft.state, draft.text) == (DraftState.READY, FRESH)
    run = operator(h.bot).runs(RunState.AWAITING_REVIEW)
    assert [r.draft_key for r in run] == [LATER_KEY]


# --- rendering -----------------------------------------------------------------------------


def similar(state: DraftState, message: MessageRef | None = None) -> SimilarPost:
    return SimilarPost(
        draft_key=EARLIER_KEY,
        score=82,
        method="rapidfuzz.token_set_ratio",
        state=state,
        at=WHEN,
        message=message,
    )


def link_to(ref: MessageRef) -> str:
    return f"{WORKSPACE}/archives/{ref.channel}/p{ref.ts.replace('.', '')}"


@pytest.mark.parametrize(
    ("state", "phrase"),
    [
        (DraftState.PUBLISHED, "the post published> on"),
        (DraftState.APPROVED, "the draft approved> on"),
        (DraftState.READY, "a draft waiting for review> since"),
    ],
)
def test_the_similarity_line_names_what_people_saw_and_links_it(
    state: DraftState, phrase: str
) -> None:
    ref = MessageRef(ANNOUNCE, "1762075800.000100")

    line = similar_line(similar(state, ref), link_to)

    day = f"<!date^{int(WHEN.timestamp())}^{{date_short}}|2 Nov 2026>"
    assert line == (
        f":warning: *82% similar* to <{WORKSPACE}/archives/{ANNOUNCE}/p1762075800000100|"
        f"{phrase} {day}"
    )


def test_the_similarity_line_has_no_link_when_the_message_is_unknown() -> None:
    assert "<http" not in similar_line(similar(DraftState.PUBLISHED), link_to)
    assert "to the post published on" in similar_line(similar(DraftState.PUBLISHED), link_to)


def test_the_record_line_shows_the_rate_and_the_last_reason_escaped() -> None:
    record = RecipeRecord(
        recipe=RECIPE,
        days=30,
        approved=3,
        decided=4,
        last_rejected_at=WHEN,
        last_rejection_reason="too salesy <!channel> & off-brand",
    )

    line = record_line(record)

    assert line.startswith(f":bar_chart: *{RECIPE}*, last 30 days: 3 of 4 approved (75%)")
    assert line.endswith(": “too salesy &lt;!channel&gt; &amp; off-brand”")
    unexplained = record_line(RecipeRecord(RECIPE, 30, 0, 1, WHEN, None))
    assert unexplained.endswith("(no reason given)")


def test_fact_lines_sit_right_above_the_buttons_and_a_long_draft_still_fits() -> None:
    facts = ("first fact", "second fact")
    item = ReviewItem(
        draft_key=LATER_KEY,
        run_id=f"{RECIPE}@{LATER}",
        state=DraftState.READY,
        revision=1,
        text="word " * 40_000,
        recipe=RECIPE,
        platform="linkedin",
        slot_at=WHEN,
        version=1,
        model="claude-test",
        input_tokens=1,
        output_tokens=2,
        decided_by=None,
        decided_at=None,
        decision_reason="sent back for review",
    )

    _, blocks = review_message(item, facts)

    assert len(blocks) <= BLOCK_LIMIT
    assert [b["elements"][0]["text"] for b in blocks[-3:-1]] == list(facts)
    assert blocks[-1]["type"] == "actions"
