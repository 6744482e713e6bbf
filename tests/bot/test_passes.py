"""`galley run`'s periodic passes, registered from one table (`bot/run.py` `Bot.passes`): each
row scheduled on its pool, a pass whose part is missing or whose cadence is off left out,
and the pools named after what they run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.passes import Every
from bot.pools import Pool
from tests.harness.slack_harness import StartBot


def test_every_pass_in_the_table_is_scheduled_on_its_pool(
    start_bot: StartBot, sqlite_url: str
) -> None:
    bot = start_bot(sqlite_url, slack='report_at = "mon 09:00"').bot
    jobs = {job.id: job for job in bot.host.scheduler.get_jobs()}
    passes = bot.passes()
    # the digest is on by default, the report set; the test key gives a batch pass
    for row in passes:
        assert jobs[row.job].executor == row.pool, row
        assert row.runs is not None and jobs[row.job].func == row.runs
    assert jobs["expiry"].func == bot.host.expire
    assert len({row.job for row in passes}) == len(passes)


def test_a_pass_whose_cadence_is_off_is_not_scheduled(start_bot: StartBot, sqlite_url: str) -> None:
    bot = start_bot(sqlite_url, slack="digest = false").bot
    bot.host.scheduler.pause()  # what is scheduled stays there to be seen, never run
    bot.host.scheduler.remove_all_jobs()
    bot.schedule_passes({every: timedelta(hours=1) for every in Every})
    scheduled = {job.id for job in bot.host.scheduler.get_jobs()}
    # the digest turned off, the weekly report off by default (no report_at)
    digest = {row.job for row in bot.passes() if row.every in (Every.DIGEST, Every.REPORT)}
    assert digest == {"digest", "report"} and not digest & scheduled
    assert {row.job for row in bot.passes()} - digest == scheduled


def test_work_runs_on_pools_named_after_it(start_bot: StartBot, sqlite_url: str) -> None:
    host = start_bot(sqlite_url).bot.host
    assert (host.drafting.name, host.publishing.name) == (Pool.DRAFTING, Pool.PUBLISHING)
    assert {Pool.FIRES, Pool.HOUSEKEEPING, Pool.SLACK} <= set(host.scheduler._executors)


def test_the_outboxs_passes_run_as_the_scheduler_starts_and_the_others_an_interval_later(
    start_bot: StartBot, sqlite_url: str
) -> None:
    """After a restart what is due to publish or to show goes at once, not a pass later."""
    bot = start_bot(sqlite_url).bot
    bot.host.scheduler.pause()  # what is scheduled stays there to be seen, never run
    hour = timedelta(hours=1)
    for at_start in (True, False):
        bot.host.scheduler.remove_all_jobs()
        before = datetime.now(UTC)
        bot.schedule_passes(dict.fromkeys(Every, hour), outbox_at_start=at_start)
        first = {job.id: job.next_run_time for job in bot.host.scheduler.get_jobs()}
        for row in bot.passes():
            if row.job not in first or row.every not in (Every.OUTBOX, Every.HOUSEKEEPING):
                continue
            soon = first[row.job] < before + timedelta(minutes=1)
            assert soon == (at_start and row.every == Every.OUTBOX), (at_start, row.job)
