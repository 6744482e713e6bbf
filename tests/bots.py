"""A real `Bot` for tests and benchmarks, pointed at the local fakes.

HTTP on 127.0.0.1 (a free port), outbox and housekeeping passes left to the caller
(`bot.sync_slack()`, `bot.reconcile()`), and start-up catch-up settled before it returns.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from bot.run import Bot
from core.settings import Settings

NEVER = timedelta(hours=1)  # periodic passes the test drives itself


def start_bot(*, config: Path, db_url: str, anthropic_url: str, slack_url: str, secret: str) -> Bot:
    settings = Settings(
        slack_bot_token="xoxb-test",
        slack_signing_secret=secret,
        anthropic_api_key="test-key",
        anthropic_base_url=anthropic_url,
        galley_config=config,
        galley_database_url=db_url,
        galley_slack_api_url=slack_url + "/api/",
        galley_http_port=0,
    )
    bot = Bot(
        settings,
        outbox_every=NEVER,
        housekeeping_every=NEVER,
        shutdown_grace=timedelta(seconds=5),
    )
    bot.http_host = "127.0.0.1"
    bot.start()
    bot.host.wait_idle()  # start-up catch-up has decided the latest due slot
    return bot
