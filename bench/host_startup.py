"""Start-up time of the scheduler host with 1 to 10,000 recipes, and idle CPU.

Start-up = `SchedulerHost.start()` until every recipe's catch-up has been decided
(each recipe's latest slot is days old, so catch-up records one `skipped` run per
recipe). Idle CPU = process CPU seconds per wall second while the started host waits
for its next fire. SQLite in a temp directory; no network. Recipes share 60 weekly
schedules (`M 9 * * mon`), or with `--distinct` each has its own (`M H D <2 months
ago> *`).
Exits 1 when 1,000 recipes take 2 s or more, or 10,000 take 15 s or more.

    .venv/bin/python -m bench.host_startup [--sizes 1,100,1000,10000] [--repeats 3]
        [--idle 10] [--distinct]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from sqlmodel import select

from bot.apscheduler_host import SchedulerHost
from core.api.services import Services
from core.models import RunRow
from core.ports import DraftRequest, ModelReply
from core.setup.config import parse_config
from core.store.engine import Store

HEADER = '[slack]\nreview_channel = "C0REVIEW"\n[defaults]\ntimezone = "Europe/London"\n'
RECIPE = '[[recipes]]\nname = "r{n}"\nplatform = "p"\nschedule = "{cron}"\nprompt = "x"\n'
GOALS_S = {1000: 2.0, 10000: 15.0}


def cron(n: int, distinct: bool) -> str:
    """Every slot is days old, so catch-up only records skips and never drafts."""
    if not distinct:
        return f"{n % 60} 9 * * mon"
    two_months_ago = (datetime.now(UTC).month - 3) % 12 + 1
    return f"{n % 60} {n // 60 % 24} {n // 1440 % 28 + 1} {two_months_ago} *"


class UnusedDrafter:
    def draft(self, request: DraftRequest) -> ModelReply:
        raise AssertionError("start-up must not call the model for days-old slots")


def start_once(
    size: int, directory: Path, distinct: bool = False
) -> tuple[float, float, SchedulerHost]:
    text = HEADER + "".join(RECIPE.format(n=n, cron=cron(n, distinct)) for n in range(size))
    store = Store(f"sqlite:///{directory / f'bench-{time.monotonic_ns()}.db'}")
    store.upgrade()
    galley = Services(parse_config(text), store, drafter=UnusedDrafter())
    host = SchedulerHost(galley, drafting_threads=4)
    started = time.perf_counter()
    host.start()
    scheduling = time.perf_counter() - started
    host.wait_idle()
    elapsed = time.perf_counter() - started
    with store.read() as session:
        recorded = session.exec(select(sa.func.count()).select_from(RunRow)).one()
    assert recorded == size, f"catch-up recorded {recorded} runs for {size} recipes"
    return scheduling, elapsed, host


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,100,1000,10000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle to measure")
    parser.add_argument("--distinct", action="store_true", help="a schedule per recipe")
    args = parser.parse_args()
    missed = []
    print(
        f"{'recipes':>8} {'jobs added s':>12} {'catch-up done s':>15} {'min s':>7} {'max s':>7}"
        f" {'idle CPU %':>10}"
    )
    with tempfile.TemporaryDirectory() as directory:
        for size in (int(s) for s in args.sizes.split(",")):
            times, scheduling = [], []
            host = None
            for _ in range(args.repeats):
                if host is not None:
                    host.stop_now()
                jobs, elapsed, host = start_once(size, Path(directory), args.distinct)
                times.append(elapsed)
                scheduling.append(jobs)
            assert host is not None
            cpu_before, wall_before = time.process_time(), time.perf_counter()
            time.sleep(args.idle)
            idle = (time.process_time() - cpu_before) / (time.perf_counter() - wall_before)
            host.stop_now()
            print(
                f"{size:>8} {statistics.median(scheduling):>12.3f}"
                f" {statistics.median(times):>15.3f} {min(times):>7.3f} {max(times):>7.3f}"
                f" {idle * 100:>10.3f}"
            )
            goal = GOALS_S.get(size)
            if goal is not None and statistics.median(times) >= goal:
                missed.append(f"{size} recipes: {statistics.median(times):.2f} s >= {goal} s")
    for line in missed:
        print("GOAL MISSED:", line)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
