"""One rule says which runs are stuck (core/operations/stuck.py, docs/design.md §12), and every
surface that says so agrees: the alert sweep, the Home tab, the daily digest and the
`galley_runs_stuck` gauge. Runs are seeded at ages on both sides of each threshold, for
two recipes with different leases and call timeouts, so a surface using a threshold of
its own, or another recipe's, or the claim lease for a publishing run, disagrees.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import select

from core.api.home import read_home
from core.api.services import Services
from core.models import RecipeRow, RunRow
from core.operations.alerts import AlertService
from core.operations.digest import build_digest
from core.operations.gauges import DatabaseGauges
from core.operations.stuck import is_stuck
from core.ports import MessageRef, RunAlert
from core.setup.config import Config, parse_config
from core.states import RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.testing import FrozenClock

CONFIG = """
[slack]
review_channel = "C0REVIEW"

[defaults]
timezone = "Europe/London"
model = "claude-test"

[[recipes]]
name = "alpha"
platform = "linkedin"
schedule = "0 9 * * mon"
system = "s"
prompt = "p"
claim_lease = "10m"
call_timeout = "30s"
publish = { to = "webhook", url = "http://127.0.0.1:9/hook" }

[[recipes]]
name = "beta"
platform = "linkedin"
schedule = "0 9 * * tue"
system = "s"
prompt = "p"
claim_lease = "4m"
call_timeout = "1m"
publish = { to = "webhook", url = "http://127.0.0.1:9/hook" }

[[recipes]]
name = "gamma"
platform = "linkedin"
schedule = "0 9 * * wed"
system = "s"
prompt = "p"
claim_lease = "10m"
drafting = "batch"
batch_deadline = "1h"
publish = { to = "webhook", url = "http://127.0.0.1:9/hook" }
"""
# alpha: drafting stuck after 20 minutes, publishing after 5; beta: after 8 and 10;
# gamma drafts in batches: stuck after its 1 h batch_deadline plus 20 minutes.
S, M, H = timedelta(seconds=1), timedelta(minutes=1), timedelta(hours=1)
SEEDED: list[tuple[str, RunState, timedelta, bool]] = [  # recipe, state, age, stuck now
    ("alpha", RunState.RUNNING, 20 * M - S, False),
    ("alpha", RunState.RUNNING, 20 * M, False),  # exactly at the threshold: not yet
    ("alpha", RunState.RUNNING, 20 * M + S, True),
    ("alpha", RunState.RUNNING, 3 * H, True),
    ("alpha", RunState.PUBLISHING, 4 * M, False),
    ("alpha", RunState.PUBLISHING, 5 * M, False),
    ("alpha", RunState.PUBLISHING, 6 * M, True),  # two claim leases would say 20 minutes
    ("beta", RunState.RUNNING, 7 * M, False),
    ("beta", RunState.RUNNING, 9 * M, True),
    ("beta", RunState.PUBLISHING, 7 * M, False),  # alpha's 5 minutes would call it stuck
    ("beta", RunState.PUBLISHING, 11 * M, True),
    ("alpha", RunState.UNCERTAIN, H, False),  # waits on people: told, never stuck
    ("alpha", RunState.AWAITING_REVIEW, 2 * 24 * H, False),
    ("alpha", RunState.APPROVED, H, False),
    ("alpha", RunState.PENDING, 3 * H, False),
    ("gone", RunState.RUNNING, 3 * H, False),  # its recipe left the config
    ("gamma", RunState.RUNNING, 30 * M, False),  # waiting in a batch: alpha's 20m would say so
    ("gamma", RunState.RUNNING, 80 * M + S, True),  # batch_deadline + two claim leases
]


class RecordingAlerter:
    def __init__(self) -> None:
        self.alerts: list[RunAlert] = []

    def alert(self, alert: RunAlert) -> MessageRef:
        self.alerts.append(alert)
        return MessageRef("C0ALERTS", f"{len(self.alerts)}.000")

    def settle(self, ref: MessageRef, alert: RunAlert) -> None:
        pass


def _seed(store: Store, now: datetime) -> dict[str, bool]:
    """The seeded runs, by id: whether each is stuck at `now`."""
    expected = {}
    with store.transaction() as session:
        for name in ("alpha", "beta", "gamma", "gone"):
            session.add(RecipeRow(name=name, updated_at=now))
        for day, (recipe, state, age, stuck) in enumerate(SEEDED, start=1):
            wall = f"2026-10-{day:02d}T09:00"
            run_id = f"{recipe}@{wall}"
            slot = datetime.fromisoformat(wall).replace(tzinfo=now.tzinfo)
            since = now - age
            session.add(
                RunRow(
                    id=run_id,
                    recipe=recipe,
                    slot_wall=wall,
                    slot_at=slot,
                    state=state,
                    created_at=since,
                    updated_at=since,
                )
            )
            expected[run_id] = stuck
    return expected


class Surfaces:
    """Each surface's answer to "which runs are stuck?", read as people would see it."""

    def __init__(self, store: Store, config: Config, clock: FrozenClock) -> None:
        self.store, self.config, self.clock = store, config, clock
        self.alerter = RecordingAlerter()
        ledger = EffectLedger(store, clock, "stuck-test")
        self.alerts = AlertService(store, config, clock, ledger, self.alerter, timedelta(days=7))
        self.gauges = DatabaseGauges()  # a collector of its own: nothing registered
        self.gauges.watch(store, config, clock)
        self.uncertain = {
            f"{r}@2026-10-{d:02d}T09:00"
            for d, (r, s, _, _) in enumerate(SEEDED, start=1)
            if s == RunState.UNCERTAIN
        }

    def alert_sweep(self) -> set[str]:
        """Runs alerted so far, uncertain ones aside (stuck stays stuck as time passes)."""
        self.alerts.sweep()
        return {a.run_id for a in self.alerter.alerts} - self.uncertain

    def home(self) -> set[str]:
        model = read_home(Services(self.config, self.store, clock=self.clock))
        assert {r.id for r in model.needing_person if not r.stuck} == self.uncertain
        return {r.id for r in model.needing_person if r.stuck}

    def digest(self) -> set[str]:
        facts = build_digest(self.store, self.config, self.clock.now())
        assert {s.run_id for s in facts.stuck if s.state == RunState.UNCERTAIN} == self.uncertain
        return {s.run_id for s in facts.stuck if s.state != RunState.UNCERTAIN}

    def gauge(self) -> int:
        [value] = [
            sample.value
            for family in self.gauges.collect()
            if family.name == "galley_runs_stuck"
            for sample in family.samples
        ]
        return int(value)


def test_every_surface_calls_the_same_runs_stuck(store: Store) -> None:
    config = parse_config(CONFIG)
    clock = FrozenClock()
    start = clock.now()
    expected = _seed(store, start)
    surfaces = Surfaces(store, config, clock)
    stuck_now = {run_id for run_id, stuck in expected.items() if stuck}

    for offset in (timedelta(0), 90 * S, 15 * M):  # the boundary run tips over at +90 s
        clock.set(start + offset)
        with store.read() as session:
            runs = session.exec(select(RunRow)).all()
        rule = {run.id for run in runs if is_stuck(run, config, clock.now())}
        if offset == timedelta(0):
            assert rule == stuck_now
        assert surfaces.alert_sweep() == rule, f"alerts at +{offset}"
        assert surfaces.home() == rule, f"Home at +{offset}"
        assert surfaces.digest() == rule, f"digest at +{offset}"
        assert surfaces.gauge() == len(rule), f"gauge at +{offset}"
