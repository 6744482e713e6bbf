"""The weekly report in the alert channel (docs/design.md §38): off by default, `report_at`
a weekday and a time, posted once per week however many replicas race for it, the week's
best post linked. Both backends.
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlmodel import col, select

from bot.report_text import report_blocks, report_text
from core.api.report import Report
from core.api.weekly_report import post_weekly_report, report_week
from core.errors import ConfigError
from core.models import EffectRow
from core.policies import EffectStep
from core.ports import MessageRef
from core.setup.config import parse_config
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.testing import FrozenClock
from tests.api.report_history import BEST_URL, NOW, report_config, report_galley, seed

REPLICAS = 2


def test_report_at_is_off_by_default_and_takes_a_weekday_and_a_time() -> None:
    assert report_config().slack.report_at is None
    text = '[slack]\nreview_channel = "C0R"\nreport_at = "{}"\n[defaults]\nmodel = "m"\n'
    assert parse_config(text.format("mon 09:00")).slack.report_at == "mon 09:00"
    with pytest.raises(ConfigError, match='like "mon 09:00"'):
        parse_config(text.format("monday 9am"))


def test_two_replicas_racing_post_the_weekly_report_once_with_the_best_post_linked(
    store: Store,
) -> None:
    seed(store)
    config, posted, start = report_config(), [], threading.Barrier(REPLICAS)

    def post(found: Report) -> MessageRef:
        time.sleep(0.2)  # the other replica arrives while this one posts
        posted.append(report_text(found, report_week(config, NOW)))
        return MessageRef("C0R", f"{len(posted)}.0001")

    def replica(worker: str) -> None:
        ledger = EffectLedger(store, FrozenClock(NOW), worker)
        start.wait()
        post_weekly_report(store, config, ledger, NOW, post)

    threads = [threading.Thread(target=replica, args=(f"w{n}",)) for n in range(REPLICAS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    [text] = posted
    assert text.startswith("*Galley weekly report* · 2026-W50")
    assert f"• Best post this week: <{BEST_URL}|weekly on bluesky:acme.bsky.social>" in text
    assert "• first-pass approval: 29% (2 of 7 decided" in text
    blocks = report_blocks(report_galley(store).report("7d"), "2026-W50")
    assert [b["type"] for b in blocks] == ["section"] * 4  # heading, 2 recipes, best post
    with store.read() as session:
        receipts = session.exec(
            select(EffectRow).where(col(EffectRow.step) == EffectStep.REPORT)
        ).all()
    assert [r.key for r in receipts] == ["report|2026-W50"]
    later = EffectLedger(store, FrozenClock(NOW), "w9")  # the same week, a day later
    assert not post_weekly_report(store, config, later, NOW.replace(day=8), post)
    assert len(posted) == 1
