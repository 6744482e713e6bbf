"""Start-up time of the scheduler host with 1, 100 and 1,000 recipes, and idle CPU.

Start-up = `SchedulerHost.start()` until every recipe's catch-up has been decided
(each recipe's latest slot is days old, so catch-up records one `skipped` run per
recipe: one database write each). Idle CPU = process CPU seconds per wall second while
the started host waits for its next fire. SQLite in a temp directory; no network.

    .venv/bin/python -m bench.host_startup [--sizes 1,100,1000] [--repeats 5] [--idle 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bot.apscheduler_host import SchedulerHost
from core.config import parse_config
from core.operator import Galley
from core.ports import DraftRequest, ModelReply
from core.store import Store

HEADER = '[slack]\nreview_channel = "C0REVIEW"\n[defaults]\ntimezone = "Europe/London"\n'
RECIPE = '[[recipes]]\nname = "r{n}"\nplatform = "p"\nschedule = "{m} 9 * * mon"\nprompt = "x"\n'


class UnusedDrafter:
    def draft(self, request: DraftRequest) -> ModelReply:
        raise AssertionError("start-up must not call the model for days-old slots")


def start_once(size: int, directory: Path) -> tuple[float, float, SchedulerHost]:
    text = HEADER + "".join(RECIPE.format(n=n, m=n % 60) for n in range(size))
    store = Store(f"sqlite:///{directory / f'bench-{time.monotonic_ns()}.db'}")
    store.upgrade()
    galley = Galley(parse_config(text), store, drafter=UnusedDrafter())
    host = SchedulerHost(galley, drafting_threads=4)
    started = time.perf_counter()
    host.start()
    scheduling = time.perf_counter() - started
    host.wait_idle()
    return scheduling, time.perf_counter() - started, host


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,100,1000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle to measure")
    args = parser.parse_args()
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
                jobs, elapsed, host = start_once(size, Path(directory))
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


if __name__ == "__main__":
    main()
