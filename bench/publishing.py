"""Publishing figures, against the local fakes over real HTTP (a running `Bot` in-process).

1. Approval to verified publication: a signed Approve click, until the run is
   `succeeded` with its receipt (webhook with a status URL, so the lookup before the
   POST is included).
2. Uncertain outcome to alert: a webhook without a status URL accepts and then hangs;
   from the moment the run is recorded `uncertain` to the alert's `chat.postMessage`.

    .venv/bin/python -m bench.publishing [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from sqlmodel import col, select

from bench.slack_review import MONDAYS, SECRET
from bot.block_kit import button_value
from bot.blocks import ACTION_APPROVE
from bot.run import Bot
from core.models import EventRow, RunRow
from core.setup.sample_config import config_text
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.fakes.webhook import FakeWebhook, accept_then_hang
from tests.harness import bots
from tests.harness.approvals import approve
from tests.harness.bots import operator
from tests.harness.slack_requests import block_actions, interactive_body, signed_headers


def start_bot(tmp: Path, slack: FakeSlack, model: FakeAnthropic, publish: str) -> Bot:
    text = config_text(pending_limit=1000).replace("[defaults]", '[defaults]\ncall_timeout = "1s"')
    text = text.replace('prompt = "Write', f'publish = {publish}\nprompt = "Write')
    (tmp / "galley.toml").write_text(text)
    return bots.start_bot(
        config=tmp / "galley.toml",
        db_url=f"sqlite:///{tmp / 'bench.db'}",
        anthropic_url=model.url,
        slack_url=slack.url,
        secret=SECRET,
    )


def state_of(bot: Bot, run_id: str) -> str:
    with bot.core.store.transaction() as session:
        return str(session.exec(select(RunRow.state).where(col(RunRow.id) == run_id)).one())


def approval_to_publication(runs: int) -> list[float]:
    timings = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeSlack() as slack,
        FakeAnthropic() as model,
        FakeWebhook() as hook,
    ):
        publish = f'{{ to = "webhook", url = "{hook.hook_url}", status_url = "{hook.status_url}" }}'
        bot = start_bot(Path(tmp), slack, model, publish)
        url = f"http://127.0.0.1:{bot.http_port}/slack/events"
        try:
            with httpx.Client(timeout=10) as client:
                for wall in MONDAYS[:runs]:
                    result = operator(bot).draft("weekly-update", wall)
                    body = interactive_body(
                        block_actions(
                            user="U0EDITOR",
                            action_id=ACTION_APPROVE,
                            value=button_value(result.key or "", 1),
                            message_ts="1.0",
                            response_url=slack.response_url("r"),
                        )
                    )
                    started = time.perf_counter()
                    client.post(url, content=body, headers=signed_headers(SECRET, body))
                    while state_of(bot, result.run) != "succeeded":
                        time.sleep(0.002)
                    timings.append(time.perf_counter() - started)
        finally:
            bot.stop()
        assert len(hook.publications) == runs
    return timings


def uncertain_to_alert(runs: int) -> list[float]:
    timings = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeSlack() as slack,
        FakeAnthropic() as model,
        FakeWebhook() as hook,
    ):
        bot = start_bot(Path(tmp), slack, model, f'{{ to = "webhook", url = "{hook.hook_url}" }}')
        try:
            for wall in MONDAYS[:runs]:
                result = operator(bot).draft("weekly-update", wall)
                hook.script_post(accept_then_hang(5))
                approve(bot.core.store, bot.core.config, bot.core.clock, result.key or "")
                alerts_before = len(slack.calls("chat.postMessage"))
                bot.services.publishing.publish_run(result.run)
                with bot.core.store.transaction() as session:
                    went_uncertain = session.exec(
                        select(EventRow.at).where(
                            col(EventRow.subject) == "run",
                            col(EventRow.run_id) == result.run,
                            col(EventRow.to_state) == "uncertain",
                        )
                    ).one()
                alert = slack.calls("chat.postMessage")[alerts_before]
                timings.append(alert.at - went_uncertain.timestamp())
        finally:
            bot.stop()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    published = approval_to_publication(args.runs)
    print(
        f"approval → verified publication, {len(published)} runs: "
        f"median {statistics.median(published) * 1000:.0f} ms, max {max(published) * 1000:.0f} ms"
    )
    alerted = uncertain_to_alert(min(args.runs, 5))
    print(
        f"uncertain → alert posted, {len(alerted)} runs: "
        f"median {statistics.median(alerted) * 1000:.0f} ms, max {max(alerted) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
