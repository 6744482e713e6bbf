"""The bot's poller tells its poll alerts right after each poll (docs/design.md §29): a
source people must fix is alerted as the poll fails, not at the next alerts pass."""

from __future__ import annotations

from typing import Any

from tests.fakes.web import FakeWeb
from tests.harness.slack_harness import CHANNEL, PEOPLE, StartBot, eventually


def test_a_refused_poll_is_alerted_by_the_poll_itself_before_any_alerts_pass(
    start_bot: StartBot, db_url: str
) -> None:
    with FakeWeb() as web:  # nothing published: the feed answers 404
        items = f'trigger = "items"\nsource = {{ kind = "feed", url = "{web.url}/feed.xml" }}'
        h = start_bot(db_url, slack=PEOPLE, publish=items)  # its start polls once

        def alerts() -> list[dict[str, Any]]:
            return [m for m in h.slack.messages(CHANNEL) if "404" in str(m.get("blocks"))]

        # the harness never runs the reconcile pass (which also sweeps the poll alerts)
        [alert] = eventually(alerts, "the poll's own alert", timeout=15)
        assert "refused" in str(alert.get("blocks"))
