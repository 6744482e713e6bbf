"""A real `Bot` publishing to the fake webhook, with alerts and review messages in the
fake Slack, driven over signed Slack requests: for the publishing tests that click
buttons. Registered as the `bot_harness` fixture in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bot.run import Bot
from core.models import DraftRow, RunRow
from core.store.engine import Store
from tests.fakes import slack_api
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.fakes.webhook import FakeWebhook
from tests.harness import bots, rows
from tests.harness.approvals import approve
from tests.harness.slack_requests import SlackSender, block_actions
from tests.harness.worlds import ALERTS, KEY, RUN, SECRET, galley_config, webhook_table


@dataclass
class BotHarness:
    bot: Bot
    slack: FakeSlack
    hook: FakeWebhook
    store: Store
    sender: SlackSender

    def run_row(self) -> RunRow:
        return rows.run_row(self.store, RUN)

    def draft_row(self) -> DraftRow:
        return rows.draft_row(self.store, KEY)

    def approve(self) -> None:
        galley = self.bot.core
        assert approve(galley.store, galley.config, galley.clock, KEY).accepted

    def click_alert(self, action_id: str, user: str) -> None:
        [alert] = self.slack.messages(ALERTS)
        [actions] = [b for b in alert["blocks"] if b["type"] == "actions"]
        [value] = [e["value"] for e in actions["elements"] if e["action_id"] == action_id]
        payload = block_actions(
            user=user,
            action_id=action_id,
            value=value,
            message_ts=alert["ts"],
            response_url=self.slack.response_url(user),
            channel=ALERTS,
            block_id="galley_alert",
            message=alert,
        )
        assert self.sender.interactive(payload).status_code == 200

    def replies(self, user: str) -> list[str]:
        return [
            str(c.params.get("text"))
            for c in self.slack.calls(slack_api.RESPONSE_URL)
            if c.path == f"/response/{user}"
        ]


@contextmanager
def bot_harness_factory(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> Iterator[Callable[..., BotHarness]]:
    """`start(db_url, status_url=…, defaults=…)`: a Bot whose recipe publishes to its own
    fake webhook (with or without a status URL), stopped on exit (the `bot_harness`
    fixture)."""
    with (
        ExitStack() as hooks,  # entered first, left last: the bots stop before their hooks
        bots.running_bots(tmp_path, fake_anthropic.url, SECRET) as start_running,
    ):

        def start(db_url: str, *, status_url: bool, defaults: str = "") -> BotHarness:
            hook = FakeWebhook().start()
            hooks.callback(hook.stop)
            publish = webhook_table(hook, status_url=status_url)
            running = start_running(galley_config(publish, defaults=defaults), db_url)
            return BotHarness(running.bot, running.slack, hook, running.store, running.sender)

        yield start
