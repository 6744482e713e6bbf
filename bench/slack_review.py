"""Slack-side figures for the review loop, against the local fakes over real HTTP.

1. Acknowledgement time of signed Approve clicks (median, p99) while every drafting
   thread is blocked on a slow model: listeners must never wait on the model.
2. Time to post a burst of 30 drafts to a fake that enforces one message per second
   per channel, against the ~29 s floor that limit sets (30 posts, 1 s apart).

    .venv/bin/python -m bench.slack_review [--clicks 300] [--burst 30]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bot.block_kit import button_value
from bot.blocks import ACTION_APPROVE
from bot.run import Bot
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.harness import bots
from tests.harness.bots import operator
from tests.harness.slack_requests import block_actions, interactive_body, signed_headers

SECRET = "bench-secret"
MONDAYS = [f"2025-{month:02d}-{day:02d}T09:00" for month, day in (
    (1, 6), (1, 13), (1, 20), (1, 27), (2, 3), (2, 10), (2, 17), (2, 24), (3, 3), (3, 10),
    (3, 17), (3, 24), (3, 31), (4, 7), (4, 14), (4, 21), (4, 28), (5, 5), (5, 12), (5, 19),
    (5, 26), (6, 2), (6, 9), (6, 16), (6, 23), (6, 30), (7, 7), (7, 14), (7, 21), (7, 28),
    (8, 4), (8, 11), (8, 18), (8, 25), (9, 1),
)]  # fmt: skip


def start_bot(directory: Path, slack: FakeSlack, anthropic: FakeAnthropic) -> Bot:
    config = directory / "galley.toml"
    config.write_text(config_text(pending_limit=1000, claim_lease="10m", model_timeout="5m"))
    return bots.start_bot(
        config=config,
        db_url=f"sqlite:///{directory / 'bench.db'}",
        anthropic_url=anthropic.url,
        slack_url=slack.url,
        secret=SECRET,
    )


def ack_times(clicks: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp, FakeSlack() as slack, FakeAnthropic() as model:
        bot = start_bot(Path(tmp), slack, model)
        try:
            result = operator(bot).draft("weekly-update", MONDAYS[0])
            bot.sync_slack()
            model.delay = 30.0  # every drafting thread now waits on a slow model
            for wall in MONDAYS[1:9]:
                recipe = bot.core.recipe("weekly-update")
                slot = bot.core.resolve_slot(recipe, wall)
                bot.host.submit(bot.core.drafting.draft_slot, recipe, slot, manual=True)
            while len(model.requests) < 5:  # four threads busy (the pool's size), one queued
                time.sleep(0.05)
            url = f"http://127.0.0.1:{bot.http_port}/slack/events"
            value = button_value(result.key or "", 1)
            timings = []
            with httpx.Client(timeout=10) as client:
                for n in range(clicks):
                    body = interactive_body(
                        block_actions(
                            user=f"U{n:05d}",
                            action_id=ACTION_APPROVE,
                            value=value,
                            message_ts="1.0",
                            response_url=slack.response_url(f"r{n}"),
                        )
                    )
                    started = time.perf_counter()
                    response = client.post(url, content=body, headers=signed_headers(SECRET, body))
                    timings.append(time.perf_counter() - started)
                    assert response.status_code == 200, response.text
        finally:
            model.delay = 0
            bot.stop()
    return timings


def burst(size: int) -> tuple[float, int, int]:
    with tempfile.TemporaryDirectory() as tmp, FakeSlack() as slack, FakeAnthropic() as model:
        bot = start_bot(Path(tmp), slack, model)
        try:
            for wall in MONDAYS[:size]:
                operator(bot).draft("weekly-update", wall)
            slack.enforce_rate_limit(1.0)
            started = time.perf_counter()
            while bot.services.outbox.post_ready_drafts():
                pass
            elapsed = time.perf_counter() - started
            posts = slack.calls("chat.postMessage")
            posted = len(slack.messages("C0REVIEW"))
        finally:
            bot.stop()
    return elapsed, posted, len(posts) - posted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clicks", type=int, default=300)
    parser.add_argument("--burst", type=int, default=30)
    args = parser.parse_args()
    timings = sorted(ack_times(args.clicks))
    p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))]
    print(
        f"ack of {len(timings)} signed clicks, all drafting threads blocked: "
        f"median {statistics.median(timings) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"max {timings[-1] * 1000:.1f} ms"
    )
    elapsed, posted, refused = burst(args.burst)
    floor = args.burst - 1
    print(
        f"burst of {args.burst} drafts at 1 msg/s/channel: {posted} posted in {elapsed:.1f} s "
        f"(floor {floor} s, +{elapsed - floor:.1f} s), {refused} posts refused with 429"
    )


if __name__ == "__main__":
    main()
