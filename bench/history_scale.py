"""What a year (or several) of history costs each periodic pass, on SQLite and PostgreSQL.

Bulk-loads `--rows` runs (with their drafts, attempts and receipts) across 50 hourly
recipes into a fresh database, then times every periodic pass with nothing to do, the
operator's `status` and first page of `runs`, and one draft; meanwhile another process
writes in a loop and records how long each of its writes waited. Exits 1 when a goal
is missed, so it guards against regressions:

    .venv/bin/python -m bench.history_scale [--rows 200000] [--database-url URL]

The goals are held as ratios to a floor taken in the same run (`bench/floors.py`): the
same driver counting the runs table bare (`SELECT count(*) FROM runs`, a scan of the
whole history). A goal in ms holds on a machine whose floor is `REFERENCE_FLOOR_MS`, the
floor of a quiet run here; each step is held to goal / reference times this run's floor.

PostgreSQL runs when `--database-url` or GALLEY_TEST_DATABASE_URL names a server: a
database `galley_bench_<pid>` is created there and dropped afterwards.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.floors import bare_read
from bench.history_seed import NOW, REVIEW_CHANNEL, config_text, load, recipe_name
from bench.scratch_db import scratch_postgres
from core.api.galley import Galley
from core.drafting.service import DraftingService
from core.drafting.sweeper import sweep_expired_claims
from core.operations.alerts import AlertService
from core.operations.digest import build_digest
from core.ports import (
    BackpressureNotice,
    DraftRequest,
    Fit,
    MessageRef,
    ModelReply,
    PostQuery,
    Publication,
    ReviewItem,
    ReviewReminder,
    RunAlert,
)
from core.publishing.service import PublishingService
from core.review.outbox import ReviewOutbox
from core.review.queue import expire_overdue_drafts
from core.scheduling.dispatch import SlotDispatcher
from core.setup.config import parse_config
from core.slots.schedule import slot_at_wall
from core.store.effects import EffectLedger
from core.store.engine import Store

PASS_GOAL_MS = 20.0
OPERATOR_GOAL_MS = 50.0
WRITE_WAIT_GOAL_MS = 100.0
WRITER_WARMUP = 20  # writes before the measured ones
TIME_BUDGET_S = 8.0  # a slow step is timed fewer times rather than for minutes
FLOOR_SQL = "SELECT count(*) FROM runs"
# The floor (median ms of FLOOR_SQL at 200,000 runs) on a day when the code before
# issue 35.3 took 57 ms for the digest on SQLite (issue 35's figure): measured on
# 2026-12-04 at load 10 with that code (digest 173.17 ms, floors 4.31 ms on SQLite and
# 60.62 ms on PostgreSQL) and scaled by 57 / 173.17. A goal in ms is goal / reference
# floors of the run's own floor.
REFERENCE_FLOOR_MS = {"sqlite": 1.42, "postgres": 19.95}


class FixedClock:
    """The bench's time: the seeded history's end. Stored times are still judged by the
    database's clock (it does not judge leases), as in a running bot."""

    def __init__(self, at: datetime = NOW) -> None:
        self.at = at

    def now(self) -> Any:
        return self.at


def this_hour() -> datetime:
    """The history's end for a measured run: the current hour, so the drafts seeded as
    waiting are within their review window by the database's clock on any day. (A fixed
    end made the draft-expiry pass expire every waiting draft once the calendar passed
    it by a day, and that one write transaction was the "longest write wait".)"""
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


class CountingWorld:
    """Slack, the destination and the model: counts calls, answers instantly."""

    def __init__(self) -> None:
        self.calls = 0

    def _call(self) -> MessageRef:
        self.calls += 1
        return MessageRef(REVIEW_CHANNEL, f"{time.time():.6f}")

    def post_review(self, item: ReviewItem) -> MessageRef:
        return self._call()

    def find_review(self, draft_key: str) -> MessageRef | None:
        self.calls += 1
        return None

    def update_review(self, ref: MessageRef, item: ReviewItem) -> None:
        self._call()

    def announce(self, notice: BackpressureNotice) -> MessageRef:
        return self._call()

    def alert(self, alert: RunAlert) -> MessageRef:
        return self._call()

    def remind(self, reminder: ReviewReminder) -> MessageRef:
        return self._call()

    @property
    def target(self) -> str:
        return "webhook"

    def publish(self, publication: Publication) -> str:
        return self._call().ts

    def lookup(self, query: PostQuery) -> str | None:
        self.calls += 1
        return None

    def link(self, external_id: str) -> str | None:
        return None

    def fit(self, text: str) -> Fit | None:
        return None

    def draft(self, request: DraftRequest) -> ModelReply:
        return ModelReply("A bench draft.", request.model, None, "end_turn", 1, 1, 0, 0)


@dataclass(frozen=True)
class Timing:
    name: str
    times: list[float]
    goal_ms: float | None
    error: str | None = None

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times) * 1000 if self.times else float("nan")

    @property
    def p99_ms(self) -> float:
        ordered = sorted(self.times)
        return ordered[max(0, round(0.99 * len(ordered)) - 1)] * 1000 if ordered else float("nan")

    def over_floor(self, floor_ms: float) -> float:
        return self.median_ms / floor_ms

    def goal_ratio(self, reference_ms: float) -> float | None:
        return None if self.goal_ms is None else self.goal_ms / reference_ms

    def missed(self, floor_ms: float, reference_ms: float) -> bool:
        if self.error is not None:
            return True
        goal = self.goal_ratio(reference_ms)
        return goal is not None and self.over_floor(floor_ms) > goal


def timed(name: str, step: Callable[[], object], repeats: int, goal_ms: float | None) -> Timing:
    times: list[float] = []
    budget_end = time.perf_counter() + TIME_BUDGET_S
    for _ in range(repeats):
        started = time.perf_counter()
        try:
            step()
        except Exception as exc:  # a pass that fails is a missed goal, with its reason
            return Timing(name, times, goal_ms, f"{type(exc).__name__}: {str(exc)[:120]}")
        times.append(time.perf_counter() - started)
        if time.perf_counter() > budget_end:
            break
    return Timing(name, times, goal_ms)


def write_in_a_loop(url: str, stop: EventType, started: EventType, result: Any) -> None:
    """Another process: one small write every 5 ms; records the slowest. The first
    writes (connecting, warming up) happen before the passes start and do not count."""
    store = Store(url)
    slowest = 0.0
    writes = -WRITER_WARMUP
    while not stop.is_set():
        if writes == 0:
            slowest = 0.0
            started.set()
        began = time.perf_counter()
        with store.transaction() as session:
            session.execute(
                sa.text("UPDATE recipes SET changed_by = :who WHERE name = :name"),
                {"who": f"writer-{writes}", "name": recipe_name(0)},
            )
        slowest = max(slowest, time.perf_counter() - began)
        writes += 1
        time.sleep(0.005)
    result.put((slowest, max(writes, 0)))
    store.dispose()


def waiting_drafts(store: Store) -> int:
    with store.read_core() as conn:
        return int(
            conn.execute(sa.text("SELECT count(*) FROM drafts WHERE state = 'ready'")).one()[0]
        )


def measure(url: str, rows: int, repeats: int) -> tuple[list[Timing], float]:
    store = Store(url)
    store.upgrade()
    began, now = time.perf_counter(), this_hour()
    counts = load(store, rows, now=now)
    print(
        f"  loaded in {time.perf_counter() - began:.1f} s: "
        + ", ".join(f"{table} {n:,}" for table, n in counts.items()),
        flush=True,
    )
    config = parse_config(config_text(pending_limit=100_000))
    clock, world = FixedClock(now), CountingWorld()
    galley = Galley(config, store, drafter=world, clock=clock)
    ledger = EffectLedger(store, clock, "bench:1:000000")
    outbox = ReviewOutbox(
        store, ledger, world, channel=REVIEW_CHANNEL, call_lease=timedelta(minutes=2)
    )
    alerts = AlertService(store, config, clock, ledger, world, timedelta(hours=4))
    publishing = PublishingService(store, config, clock, ledger, lambda _recipe: world)
    limits = {name: r.pending_limit for name, r in config.recipes.items()}
    passes: list[tuple[str, Callable[[], object], float | None]] = [
        ("outbox: post ready drafts", outbox.post_ready_drafts, PASS_GOAL_MS),
        ("outbox: sync messages", outbox.sync_messages, PASS_GOAL_MS),
        ("outbox: backpressure", lambda: outbox.announce_backpressure(limits), PASS_GOAL_MS),
        ("publishable runs", publishing.publish_pending, PASS_GOAL_MS),
        ("alerts sweep", alerts.sweep, PASS_GOAL_MS),
        ("expired-claim sweep", lambda: sweep_expired_claims(store, clock), PASS_GOAL_MS),
        ("draft expiry", lambda: expire_overdue_drafts(store, config, clock), PASS_GOAL_MS),
        # A report over a fixed window (a day of runs, 30 days of decisions), never
        # "nothing to do": held to the operator reads' goal.
        ("daily digest", lambda: build_digest(store, config, now), OPERATOR_GOAL_MS),
        ("galley status", galley.status, OPERATOR_GOAL_MS),
        ("galley runs (first page)", galley.runs, OPERATOR_GOAL_MS),
    ]
    context = multiprocessing.get_context("spawn")
    stop, started, result = context.Event(), context.Event(), context.Queue()
    waiting = waiting_drafts(store)
    writer = context.Process(target=write_in_a_loop, args=(url, stop, started, result))
    writer.start()
    started.wait(60)
    timings = [timed(name, step, repeats, goal) for name, step, goal in passes]
    stop.set()
    slowest, writes = result.get(timeout=60)
    writer.join()
    if (still := waiting_drafts(store)) != waiting:  # the passes were to find nothing to do
        what = f"{waiting} waiting drafts before the passes, {still} after"
        timings.append(Timing("drafts left waiting by the passes", [], 0, what))
    drafting = DraftingService(store, world, clock=clock, worker="bench:1:draft")
    recipe = config.recipes[recipe_name(1)]
    upcoming = iter(range(1, 10_000))

    def one_draft() -> object:
        wall = now.replace(tzinfo=None, minute=1) + timedelta(hours=next(upcoming))
        return drafting.draft_slot(recipe, slot_at_wall(recipe, wall), manual=True)

    timings.append(timed("one draft", one_draft, repeats, None))
    dispatcher = SlotDispatcher(store, drafting, clock, recipes=config.recipes)
    fire = timed(
        "a fire's look at its recipe's runs",
        lambda: dispatcher._unrun_slots(recipe, now),  # the query each fire makes
        repeats,
        None,
    )
    timings.append(fire)
    timings.append(Timing(f"longest write wait ({writes} writes)", [slowest], WRITE_WAIT_GOAL_MS))
    if world.calls:
        timings.append(Timing("calls to Slack/model with nothing to do", [], 0, f"{world.calls}"))
    floor = statistics.median(bare_read(store.engine, FLOOR_SQL, (), repeats))  # ~ a pass
    store.dispose()
    return timings, floor


def report(timings: list[Timing], floor_ms: float, reference_ms: float) -> bool:
    print(f"  floor: {FLOOR_SQL!r} bare, median {floor_ms:.2f} ms (reference {reference_ms} ms)")
    head = f"  {'step':<40} {'runs':>5} {'median ms':>10} {'p99 ms':>10} {'x floor':>8}"
    print(f"{head} {'goal x':>7} {'(ms)':>5}  goal")
    for t in timings:
        ratio = t.goal_ratio(reference_ms)
        goal = "" if ratio is None else f"{ratio:.2f} {t.goal_ms:>5.0f}"
        mark = "MISS" if t.missed(floor_ms, reference_ms) else ("PASS" if ratio else "-")
        if t.error:
            blank = f"{'':>10} {'':>10} {'':>8}"
            print(f"  {t.name:<40} {len(t.times):>5} {blank} {goal:>13}  {mark}: {t.error}")
            continue
        line = f"  {t.name:<40} {len(t.times):>5} {t.median_ms:>10.2f} {t.p99_ms:>10.2f}"
        print(f"{line} {t.over_floor(floor_ms):>8.2f} {goal:>13}  {mark}")
    return not any(t.missed(floor_ms, reference_ms) for t in timings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000, help="runs in the history")
    parser.add_argument("--database-url", default=os.environ.get("GALLEY_TEST_DATABASE_URL"))
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"history of {args.rows:,} runs across 50 recipes; {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"1-minute load average {os.getloadavg()[0]:.2f}; goals: pass {PASS_GOAL_MS:.0f} ms,")
    print(f"operator {OPERATOR_GOAL_MS:.0f} ms (medians), write wait {WRITE_WAIT_GOAL_MS:.0f} ms")
    all_ok = True
    backends = args.backends.split(",")
    if "sqlite" in backends:
        with tempfile.TemporaryDirectory() as directory:
            print("sqlite:", flush=True)
            url = f"sqlite:///{Path(directory) / 'history.db'}"
            all_ok &= report(*measure(url, args.rows, args.repeats), REFERENCE_FLOOR_MS["sqlite"])
    if "postgres" in backends and args.database_url:
        url, drop = scratch_postgres(args.database_url, "history")
        try:
            print("postgres:", flush=True)
            timings, floor = measure(url, args.rows, args.repeats)
            all_ok &= report(timings, floor, REFERENCE_FLOOR_MS["postgres"])
        finally:
            drop()
    elif "postgres" in backends:
        print("postgres: skipped (no --database-url and no GALLEY_TEST_DATABASE_URL)")
    print("all goals met" if all_ok else "GOALS MISSED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
