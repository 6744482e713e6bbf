"""`galley run`'s periodic passes as the table `Bot.passes` (bot/run.py) writes them: how
often a pass runs (`Every`), one row of the table (`Pass`), and the scheduler's trigger
for each cadence from the config (an interval, the daily digest, the weekly report).
Nothing here runs a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from enum import StrEnum
from typing import NamedTuple
from zoneinfo import ZoneInfo

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.pools import Pool
from core.api.weekly_report import report_schedule
from core.setup.config import SlackSection

DIGEST_GRACE = timedelta(hours=1)  # a digest missed by less (a restart) is still posted


class Every(StrEnum):
    """How often a periodic pass runs (`Bot`'s arguments and the config say how long)."""

    OUTBOX = "outbox"  # outbox_every: what people see and what is due to publish
    SWEEP = "sweep"  # sweep_every, else the shortest heartbeat: claims of the dead
    HOUSEKEEPING = "housekeeping"  # housekeeping_every
    DIGEST = "digest"  # daily at `[slack] digest_at`, when the digest is on
    REPORT = "report"  # weekly at `[slack] report_at`, when set (docs/design.md §38)


class Pass(NamedTuple):
    job: str  # the scheduler's job id
    runs: Callable[[], object] | None  # what it calls; None where its part is missing
    every: Every
    pool: Pool  # the scheduler's pool it runs on


def trigger_for(
    every: Every, intervals: dict[Every, timedelta], slack: SlackSection
) -> BaseTrigger | None:
    """The scheduler's trigger for a pass that runs `every`; None when its cadence is off
    (no digest, no `report_at`)."""
    if every == Every.REPORT:
        if slack.report_at is None:
            return None
        day, hour, minute = report_schedule(slack.report_at)
        zone = ZoneInfo(slack.digest_timezone)
        return CronTrigger(day_of_week=day, hour=hour, minute=minute, timezone=zone)
    if every != Every.DIGEST:
        return IntervalTrigger(seconds=intervals[every].total_seconds())
    if not slack.digest:
        return None
    hour, minute = (int(part) for part in slack.digest_at.split(":"))
    return CronTrigger(hour=hour, minute=minute, timezone=ZoneInfo(slack.digest_timezone))
