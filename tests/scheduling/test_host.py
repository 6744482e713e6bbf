"""The scheduler host: nominal fire times, graceful shutdown, `galley check`, the digest."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.events import EVENT_JOB_REMOVED
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger
from sqlmodel import select
from typer.testing import CliRunner

from bot.apscheduler_host import NominalTimeExecutor, SchedulerHost
from bot.cli import app
from bot.digest_text import digest_text
from core.api.galley import Galley
from core.api.services import Services
from core.models import DraftRow
from core.operations.digest import build_digest
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text, make_config
from tests.harness.approvals import approve


def test_each_fire_is_handed_its_nominal_run_time() -> None:
    seen: list[datetime] = []
    done = threading.Event()
    scheduler = BackgroundScheduler(timezone=UTC, executors={"default": NominalTimeExecutor()})
    nominal = datetime.now(UTC) + timedelta(seconds=0.3)

    def job(scheduled_at: datetime | None = None) -> None:
        assert scheduled_at is not None
        seen.append(scheduled_at)
        done.set()

    removed = threading.Event()  # a date job is removed once fired: shut down after that,
    # or the scheduler's own thread finds it gone (JobLookupError) while stopping
    scheduler.add_listener(lambda _event: removed.set(), EVENT_JOB_REMOVED)
    scheduler.add_job(job, DateTrigger(run_date=nominal))
    scheduler.start()
    try:
        assert done.wait(5)
        assert removed.wait(5)
    finally:
        scheduler.shutdown()
    assert seen == [nominal]


def _host(store: Store, drafter: Any) -> tuple[Services, SchedulerHost]:
    services = Services(make_config(), store, drafter=drafter)
    return services, SchedulerHost(services, drafting_threads=2)


def test_shutdown_lets_a_running_model_call_finish_within_the_deadline(sqlite_url: str) -> None:
    release = threading.Event()
    galley, host = _host(Store(sqlite_url), InstantDrafter(release=release))
    recipe = galley.recipe("weekly-update")
    host.submit(galley.drafting.draft_slot, recipe, galley.resolve_slot(recipe, "2026-11-23T09:00"))
    time.sleep(0.3)  # the call is in flight
    threading.Timer(0.5, release.set).start()  # the model answers half a second later

    finished = host.stop(timedelta(seconds=5))

    assert finished
    with galley.store.transaction() as session:
        [draft] = session.exec(select(DraftRow)).all()
    assert draft.state == "ready"


def test_shutdown_past_the_deadline_leaves_the_claim_for_the_next_start(sqlite_url: str) -> None:
    release = threading.Event()
    galley, host = _host(Store(sqlite_url), InstantDrafter(release=release))
    recipe = galley.recipe("weekly-update")
    host.submit(galley.drafting.draft_slot, recipe, galley.resolve_slot(recipe, "2026-11-23T09:00"))
    time.sleep(0.3)

    finished = host.stop(timedelta(seconds=0.2))
    release.set()

    assert not finished
    host.submit(lambda: None)  # a stopped host takes no new work
    with galley.store.transaction() as session:
        [draft] = session.exec(select(DraftRow)).all()
    assert draft.state in ("claimed", "ready")  # never lost: finished or still claimed


def test_galley_check_shows_the_next_five_slots_and_flags_dst(tmp_path: Path) -> None:
    config = tmp_path / "galley.toml"
    text = config_text().replace('"0 9 * * mon"', '"30 1 * * *"')  # 01:30 London, daily
    config.write_text(text)
    env = {"GALLEY_CONFIG": str(config), "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'g.db'}"}
    from freezegun import freeze_time

    with freeze_time("2026-10-23 12:00:00"):
        result = CliRunner().invoke(app, ["check", "--json"], env=env)

    assert result.exit_code == 0, result.output
    [recipe] = json.loads(result.stdout)["recipes"]
    assert recipe["description"] == "At 01:30"
    assert [s["run"] for s in recipe["next_slots"]][:3] == [
        "weekly-update@2026-10-24T01:30",
        "weekly-update@2026-10-25T01:30",
        "weekly-update@2026-10-26T01:30",
    ]
    assert [s["dst"] for s in recipe["next_slots"]][:3] == [None, "repeated_first", None]


def test_the_digest_counts_what_people_should_know(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    clock = FrozenClock(datetime(2026, 11, 30, 10, 0, tzinfo=UTC))
    services = Services(make_config(pending_limit=9), store, drafter=InstantDrafter(), clock=clock)
    galley = Galley.over(services)
    for wall in ("2026-11-16T09:00", "2026-11-23T09:00"):
        galley.draft("weekly-update", wall)
    galley.pause("all", actor="U0ADMIN")
    galley.draft("weekly-update", "2026-11-30T09:00")  # skipped: paused
    key = "linkedin|weekly-update@2026-11-16T09:00|v1"
    approve(store, services.config, clock, key)
    same_day = digest_text(build_digest(store, services.config, clock.now()))
    clock.advance(timedelta(hours=40))  # the other draft nears its 48h review window

    digest = digest_text(build_digest(store, services.config, clock.now()))

    assert "Skipped (24h): paused 1" in same_day
    assert "Skipped (24h)" not in digest  # 40 hours later the skip is old news
    assert "Nothing stuck or uncertain." in digest
    assert "About to expire unreviewed: `weekly-update@2026-11-23T09:00`" in digest
    assert "Approved over 30 days: *weekly-update* 1/1 (100%)" in digest


def test_a_slot_whose_worker_died_is_drafted_again_by_the_sweeper(db_url: str) -> None:
    from core.drafting.claims import Claim, claim_slot
    from core.models import RunRow

    store = Store(db_url)
    monday = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    clock = FrozenClock(monday + timedelta(minutes=1))
    drafter = InstantDrafter()
    services = Services(
        make_config(claim_lease="3m", model_timeout="1m"), store, drafter=drafter, clock=clock
    )
    recipe = services.recipe("weekly-update")
    slot = services.resolve_slot(recipe, "2026-11-23T09:00")
    dead = claim_slot(store, recipe, slot, worker="dead", actor="dead", manual=False, clock=clock)
    assert isinstance(dead, Claim)
    host = SchedulerHost(services, drafting_threads=1)
    clock.advance(timedelta(minutes=4))  # the dead worker's lease has run out

    host.sweep_claims()
    host.wait_idle()

    assert drafter.calls == 1
    with store.transaction() as session:
        run = session.exec(select(RunRow)).one()
    assert run.state == "awaiting_review"
    host.stop_now()
    store.dispose()
