"""The weekly report in the alert channel (docs/design.md §38): the last 7 days' report,
posted once per ISO week across replicas (a receipt keyed `report|<week>`) at the
`[slack] report_at` day and time, read in `digest_timezone`. Off unless `report_at` is
set. It never decides anything: it reads the report and posts it through `post`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from core.api.report import Report, read_report
from core.identity import weekly_report_key
from core.operations.alert_posts import post_once_in
from core.policies import EffectStep
from core.ports import MessageRef
from core.setup.config import Config
from core.store.effects import EffectLedger
from core.store.engine import Store

WEEK = timedelta(days=7)


def report_week(config: Config, now: datetime) -> str:
    """The ISO week `now` falls in, in the digest's zone: `2026-W49`."""
    year, week, _ = now.astimezone(ZoneInfo(config.slack.digest_timezone)).isocalendar()
    return f"{year}-W{week:02d}"


def report_schedule(report_at: str) -> tuple[str, int, int]:
    """`mon 09:00` as (day, hour, minute), for the bot's cron trigger."""
    day, clock = report_at.split()
    hour, minute = (int(part) for part in clock.split(":"))
    return day, hour, minute


def post_weekly_report(
    store: Store,
    config: Config,
    ledger: EffectLedger,
    now: datetime,
    post: Callable[[Report], MessageRef],
) -> bool:
    """This week's report, once per week across replicas; True if this call posted it.
    The receipt is claimed before the report is read, so a second replica reads nothing."""
    week = report_week(config, now)

    def send() -> MessageRef:
        with store.read() as session:
            return post(read_report(session, list(config.recipes), now, WEEK))

    return post_once_in(ledger, weekly_report_key(week), EffectStep.REPORT, {"week": week}, send)
