"""The Slack review harness: a real `Bot` (Bolt, outbox, scheduler) against the fake Slack
Web API and the fake Anthropic API over real HTTP, and what a test does with it.

Registered as the `start_bot` fixture in tests/conftest.py (as `worlds` is for
publishing). Slack's requests are signed with a real signing secret and handed to Bolt's
dispatch in this process; `start_bot(…, over_http=True)` serves them through uvicorn's
`/slack/events` instead, for the tests of that transport. Tests drive outbox passes
themselves (`bot.sync_slack()`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlmodel import col, select

from bot.run import Bot
from core.drafting_policies import DraftOutcome
from core.models import DraftRow, EffectRow, EventRow, RecipeRow, RunRow
from core.review.queue import edit
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import RESPONSE_URL, FakeSlack, RecordedCall
from tests.harness import bots, rows
from tests.harness.bots import operator
from tests.harness.slack_requests import SlackAnswer, SlackSender, block_actions, slash_command
from tests.harness.timing import scaled

SECRET = "8f742231b10e8888abcd99yyyzzz85a5-galley-test"
CHANNEL = "C0REVIEW"
RECIPE = "weekly-update"
SLOT = "2026-11-23T09:00"  # the latest due Monday at bots.BOT_EPOCH
RUN = f"{RECIPE}@{SLOT}"
KEY = f"linkedin|{RUN}|v1"
APPROVE, REJECT, EDIT = "galley_approve", "galley_reject", "galley_edit"
PEOPLE = 'approvers = ["U0EDITOR", "U0EDITOR2", "S0EDITORS"]\nadmins = ["U0ADMIN"]'
SETTLE = 0.3  # time for a listener that should do nothing to have done something
T = TypeVar("T")


def eventually(probe: Callable[[], T], what: str, timeout: float = 5.0) -> T:
    """Poll until `probe()` is truthy (Bolt acks first and runs listeners after); the
    timeout is scaled (tests/harness/timing.py)."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def actions_of(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in blocks if b.get("type") == "actions"]


def button(blocks: list[dict[str, Any]], action_id: str) -> str:
    """The value of the one button `action_id` in any actions block (a long set's
    **Show all** has a block of its own)."""
    elements = [e for actions in actions_of(blocks) for e in actions["elements"]]
    [value] = [e["value"] for e in elements if e["action_id"] == action_id]
    return str(value)


@dataclass
class Harness:
    bot: Bot
    slack: FakeSlack
    anthropic: FakeAnthropic
    store: Store
    sender: SlackSender

    # --- acting ---

    def draft(self, slot: str = SLOT) -> str:
        result = operator(self.bot).draft(RECIPE, slot)
        assert result.outcome == DraftOutcome.DRAFTED, result
        assert result.key is not None
        return result.key

    def draft_and_post(self, slot: str = SLOT) -> tuple[str, dict[str, Any]]:
        key = self.draft(slot)
        self.bot.sync_slack()
        return key, self.message_for(key)

    def click(
        self,
        action_id: str,
        user: str,
        key: str = KEY,
        *,
        value: str | None = None,
        **signing: Any,
    ) -> SlackAnswer:
        """A signed click on the review message's button, as it currently reads."""
        message = self.message_for(key)
        payload = block_actions(
            user=user,
            action_id=action_id,
            value=value if value is not None else button(message["blocks"], action_id),
            message_ts=message["ts"],
            response_url=self.slack.response_url(user),
            message=message,
        )
        return self.sender.interactive(payload, **signing)

    def command(self, text: str, user: str, **signing: Any) -> SlackAnswer:
        body = slash_command(text=text, user=user, response_url=self.slack.response_url(user))
        return self.sender.send(body, **signing)

    def ask(self, text: str, user: str) -> str:
        """`/galley <text>` from `user`; the reply it gets through response_url."""
        before = len(self.replies(user))
        assert self.command(text, user).status_code == 200
        replies = eventually(lambda: self.replies(user)[before:], f"the reply to {text!r}")
        [reply] = replies
        return reply

    # --- looking ---

    def review_messages(self) -> list[dict[str, Any]]:
        return [
            m
            for m in self.slack.messages(CHANNEL)
            if (m.get("metadata") or {}).get("event_type") == "galley_draft"
        ]

    def message_for(self, key: str) -> dict[str, Any]:
        [message] = [
            m for m in self.review_messages() if m["metadata"]["event_payload"]["draft_key"] == key
        ]
        return message

    def calls(self, method: str) -> list[RecordedCall]:
        return self.slack.calls(method)

    def replies(self, user: str | None = None) -> list[str]:
        """Texts sent through response_url (respond()), optionally to one user's click."""
        return [
            str(c.params.get("text"))
            for c in self.slack.calls(RESPONSE_URL)
            if user is None or c.path == f"/response/{user}"
        ]

    def ephemerals(self, user: str) -> list[str]:
        return [
            str(c.params.get("text"))
            for c in self.slack.calls("chat.postEphemeral")
            if c.params.get("user") == user
        ]

    def draft_row(self, key: str = KEY) -> DraftRow:
        return rows.draft_row(self.store, key)

    def run_row(self, run: str = RUN) -> RunRow | None:
        with self.store.transaction() as session:
            return session.exec(select(RunRow).where(col(RunRow.id) == run)).one_or_none()

    def receipt(self, key: str = KEY) -> EffectRow | None:
        with self.store.transaction() as session:
            return session.exec(
                select(EffectRow).where(col(EffectRow.key) == f"{key}|review")
            ).one_or_none()

    def recipe_row(self) -> RecipeRow:
        with self.store.transaction() as session:
            return session.exec(select(RecipeRow).where(col(RecipeRow.name) == RECIPE)).one()

    def draft_events(self, to_state: str, key: str = KEY) -> list[EventRow]:
        with self.store.transaction() as session:
            return list(
                session.exec(
                    select(EventRow).where(
                        col(EventRow.subject) == "draft",
                        col(EventRow.subject_id) == key,
                        col(EventRow.to_state) == to_state,
                    )
                ).all()
            )


StartBot = Callable[..., Harness]


@contextmanager
def harness_factory(tmp_path: Path, fake_anthropic: FakeAnthropic) -> Iterator[StartBot]:
    """`start(db_url, slack=…, defaults=…, publish=…, over_http=False, **config_overrides)`:
    a Bot on `db_url` with the fakes, stopped on exit; `slack=` and `defaults=` add config
    lines, `publish=` a publish line on the recipe (the `start_bot` fixture). Clicks reach
    Bolt's dispatch in process; `over_http=True` sends them through uvicorn instead."""
    with bots.running_bots(tmp_path, fake_anthropic.url, SECRET) as start_running:

        def start(
            db_url: str,
            *,
            slack: str = "",
            defaults: str = "",
            publish: str = "",
            over_http: bool = False,
            **overrides: Any,
        ) -> Harness:
            text = config_text(**overrides)
            if publish:  # a TOML inline table is one line: it goes right after `prompt`
                text = re.sub(
                    r"^(prompt = .*)$",
                    lambda m: f"{m.group(1)}\n{publish}",
                    text,
                    count=1,
                    flags=re.M,
                )
            text = text.replace(
                f'review_channel = "{CHANNEL}"', f'review_channel = "{CHANNEL}"\n{slack}'
            )
            text = text.replace("[defaults]\n", f"[defaults]\n{defaults}\n")
            running = start_running(text, db_url, over_http=over_http)
            return Harness(
                running.bot, running.slack, fake_anthropic, running.store, running.sender
            )

        yield start


# --- changes made behind a reader's back -------------------------------------------------


def bump_recipe(h: Harness) -> None:
    operator(h.bot).bump(RECIPE, actor="U0ADMIN", reason="new tone")


def edit_revision_1(h: Harness) -> None:
    galley = h.bot.core
    answer = edit(
        galley.store,
        galley.config,
        galley.clock,
        draft_key=KEY,
        revision=1,
        text="An edited draft.",
        user="U0EDITOR",
        permitted=True,
    )
    assert answer.accepted, answer


def age_past_review_window(h: Harness) -> None:
    with h.store.transaction() as session:
        session.execute(
            sa.update(DraftRow)
            .where(col(DraftRow.key) == KEY)
            .values(ready_at=h.bot.core.clock.now() - timedelta(hours=49))  # window: 48h
        )
