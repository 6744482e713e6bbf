"""`galley run` as a real process, SIGKILLed and restarted (docs/design.md §20).

Counts what the fakes received and what the database holds: drafts per slot, model
requests, review posts. Both backends.
"""

from __future__ import annotations

import itertools
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import col, select

from core.failpoints import FAILPOINT_EXIT_CODE
from core.models import AttemptRow, DraftRow, EffectRow, RunRow
from core.setup.config import load_config
from core.slots.schedule import slots_between
from core.states import DraftState, EffectState, RunState
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.anthropic_api import hang, read_requests, write_script
from tests.fakes.slack_api import read_calls, read_messages
from tests.harness.deployments import Processes
from tests.harness.processes import fake_server, galley_run_env, stop, wait_for
from tests.harness.timing import scaled

pytestmark = pytest.mark.slow
REVIEW = "C0REVIEW"


@dataclass
class Deployment(Processes):
    """A config, a database and the two fakes, from which `galley run` processes start."""

    anthropic_state: Path
    slack_state: Path

    def drafts(self) -> list[DraftRow]:
        with self.store.transaction() as session:
            return list(session.exec(select(DraftRow)).all())

    def ready(self) -> list[DraftRow]:
        return [d for d in self.drafts() if d.state == DraftState.READY]

    def runs(self) -> list[RunRow]:
        with self.store.transaction() as session:
            return list(session.exec(select(RunRow).order_by(col(RunRow.slot_at))).all())

    def review_posts(self) -> int:
        calls = read_calls(self.slack_state)
        return sum(1 for c in calls if c["method"] == "chat.postMessage")

    def model_requests(self) -> int:
        return len(read_requests(self.anthropic_state))


def deployment(
    tmp_path: Path, db_url: str, schedule: str, **overrides: str
) -> Iterator[Deployment]:
    config = tmp_path / "galley.toml"
    leases = {"claim_lease": "20s", "model_timeout": "5s"} | overrides
    text = config_text(pending_limit=100, **leases)
    text = text.replace('"0 9 * * mon"', f'"{schedule}"')
    text = text.replace("[defaults]", '[defaults]\nmisfire_grace = "5m"\ncall_timeout = "2s"')
    config.write_text(text)
    anthropic_state, slack_state = tmp_path / "anthropic.json", tmp_path / "slack.json"
    with (
        fake_server("tests.fakes.anthropic_api", anthropic_state) as anthropic_url,
        fake_server("tests.fakes.slack_api", slack_state) as slack_url,
    ):
        env = galley_run_env(config, db_url, anthropic_url=anthropic_url, slack_url=slack_url)
        store = Store(db_url)
        deployed = Deployment(env, store, tmp_path, anthropic_state, slack_state)
        yield deployed
        deployed.close()


@pytest.fixture
def every_minute(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    yield from deployment(tmp_path, db_url, "* * * * *")


@pytest.fixture
def weekly(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    yield from deployment(tmp_path, db_url, "0 9 * * mon")


def test_killed_and_restarted_bot_drafts_every_due_slot_once(every_minute: Deployment) -> None:
    first = every_minute.start()
    try:
        wait_for(lambda: len(every_minute.ready()) >= 1, 60, "the first draft")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=scaled(10))
    killed_at = datetime.now(UTC)
    boundary = killed_at.replace(second=0, microsecond=0).timestamp() + 61
    time.sleep(max(0.0, boundary - time.time()))  # a slot falls due while the bot is down

    second = every_minute.start()
    try:
        wait_for(lambda: len(every_minute.ready()) >= 2, 60, "a draft after the restart")
        wait_for(lambda: every_minute.review_posts() >= 2, 30, "review posts")
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=scaled(30)) == 0

    drafts = every_minute.drafts()
    runs = every_minute.runs()
    assert len({d.run_id for d in drafts}) == len(drafts)  # no slot drafted twice
    assert every_minute.model_requests() == len(drafts)
    # each draft's message posted once: a slot that fell due just before SIGTERM may be
    # drafted with its message left to the next start's outbox, never posted twice
    posted = [d for d in drafts if d.shown_state is not None]
    assert len(posted) >= 2 and every_minute.review_posts() == len(posted)
    drafted = {d.run_id for d in drafts}
    for run in runs:  # every slot from the first to the last is accounted for
        assert run.id in drafted or run.state == RunState.SKIPPED, (run.id, run.state)
    minutes = [r.slot_at for r in runs]
    assert all((b - a).total_seconds() == 60 for a, b in itertools.pairwise(minutes))


@pytest.fixture
def slow_model(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    yield from deployment(tmp_path, db_url, "* * * * *", claim_lease="5m", model_timeout="2m")


def test_sigterm_exits_within_the_grace_even_while_a_model_call_hangs(
    slow_model: Deployment,
) -> None:
    """A drafting thread stuck on a model call that outlives the grace does not hold the
    process open; its claim is left for another process to take over."""
    write_script(slow_model.anthropic_state, [hang(90)])
    bot = slow_model.start(grace=2)
    try:
        wait_for(lambda: slow_model.model_requests() >= 1, 60, "a model call in flight")
    except BaseException:
        bot.kill()
        raise
    asked = time.monotonic()
    bot.send_signal(signal.SIGTERM)
    code = bot.wait(timeout=scaled(30))
    took = time.monotonic() - asked

    assert code == 0
    assert took < 2 + 1.0, f"exited {took:.1f} s after SIGTERM with a 2 s grace"
    [claimed] = slow_model.drafts()
    assert claimed.state == DraftState.CLAIMED  # left for take-over, not lost


def test_killed_right_after_the_review_post_finds_it_instead_of_posting_again(
    weekly: Deployment,
) -> None:
    drafted = weekly.galley("draft", "weekly-update", "--slot", "2026-11-23T09:00", "--json")
    assert '"drafted"' in drafted.stdout, drafted.stderr

    crashed = weekly.start(failpoint="after_review_post")
    assert crashed.wait(timeout=scaled(60)) == FAILPOINT_EXIT_CODE
    assert weekly.review_posts() == 1
    [message] = read_messages(weekly.slack_state)[REVIEW]

    restarted = weekly.start()
    try:
        wait_for(lambda: _review_receipt(weekly) == EffectState.SUCCEEDED, 60, "the receipt")
    finally:
        stop(restarted)

    assert weekly.review_posts() == 1  # found by its metadata, not posted again
    assert len(read_messages(weekly.slack_state)[REVIEW]) == 1
    with weekly.store.transaction() as session:
        receipt = session.exec(select(EffectRow).where(col(EffectRow.step) == "review")).one()
    assert receipt.external_id == message["ts"]


def _review_receipt(deployment: Deployment) -> str | None:
    with deployment.store.transaction() as session:
        receipt = session.exec(
            select(EffectRow).where(col(EffectRow.step) == "review")
        ).one_or_none()
        return None if receipt is None else str(receipt.state)


@pytest.fixture
def three_replicas(tmp_path: Path, pg_url: str) -> Iterator[Deployment]:
    """Replicas share PostgreSQL (docs/design.md §6); the default heartbeat (2 s), take-over
    (8 s) and overlap (skip) apply."""
    yield from deployment(tmp_path, pg_url, "* * * * *")


def _attempts(deployment: Deployment) -> list[AttemptRow]:
    with deployment.store.transaction() as session:
        return list(session.exec(select(AttemptRow).order_by(col(AttemptRow.started_at))).all())


def _state(deployment: Deployment, run_id: str) -> str | None:
    with deployment.store.transaction() as session:
        run = session.exec(select(RunRow).where(col(RunRow.id) == run_id)).one_or_none()
        return None if run is None else str(run.state)


def test_a_replica_killed_as_a_slot_fires_loses_no_slot(three_replicas: Deployment) -> None:
    """The chaos floor: three replicas, the one drafting a slot is SIGKILLed in its first
    seconds. Another replica drafts that slot again, and the next slot still runs (a
    dead holder's claim neither strands its slot nor counts as a running overlap)."""
    write_script(three_replicas.anthropic_state, [], delay=3.0)  # a kill lands mid-call
    now = datetime.now(UTC)
    into_minute = now.second + now.microsecond / 1e6
    # the next slot at least 40 s away: the kill, the take-over (8 s) and the redraft (3 s)
    # are over before it fires, so an overlap skip of it would be a bug, never the timing
    if into_minute > 20:
        time.sleep(60.5 - into_minute)
    replicas = [three_replicas.start() for _ in range(3)]
    try:
        wait_for(lambda: len(_attempts(three_replicas)) >= 1, 60, "the slot's first call")
        [first] = _attempts(three_replicas)
        [holder] = [r for r in replicas if f":{r.pid}:" in first.worker]
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=scaled(10))
        killed_run = first.run_id
        wait_for(
            lambda: _state(three_replicas, killed_run) == RunState.AWAITING_REVIEW,
            45,
            "the killed slot drafted again by another replica",
        )
        slot = datetime.fromisoformat(killed_run.partition("@")[2])
        next_run = f"weekly-update@{(slot + timedelta(minutes=1)).isoformat(timespec='minutes')}"
        wait_for(
            lambda: _state(three_replicas, next_run) == RunState.AWAITING_REVIEW,
            100,
            "the next slot drafted",
        )
    finally:
        for replica in replicas:
            if replica.poll() is None:
                stop(replica)

    drafts = three_replicas.drafts()
    assert len({d.run_id for d in drafts}) == len(drafts)  # no slot drafted twice
    assert {killed_run, next_run} <= {d.run_id for d in drafts}
    takeover = [a for a in _attempts(three_replicas) if a.run_id == killed_run]
    assert [a.outcome for a in takeover] == ["abandoned", "ok"]


def test_a_bump_before_a_start_drafts_both_bumped_slots_at_the_new_version_once(
    weekly: Deployment,
) -> None:
    """`galley draft` twice (slots weeks old), `galley bump`, then `galley run`: the bump
    is a person's request, so the start-up catch-up drafts both slots at v2, once each,
    however late they are (misfire_grace is 5 minutes here)."""
    recipe = load_config(Path(weekly.env["GALLEY_CONFIG"])).recipes["weekly-update"]
    now = datetime.now(UTC)
    slots = slots_between(recipe, now - timedelta(weeks=4, days=1), now - timedelta(weeks=2))[-2:]
    assert len(slots) == 2
    for slot in slots:
        drafted = weekly.galley("draft", "weekly-update", "--slot", slot.wall.isoformat())
        assert drafted.returncode == 0, drafted.stderr
    bumped = weekly.galley("bump", "weekly-update", "--as", "U0ADMIN")
    assert bumped.returncode == 0, bumped.stderr
    assert "2 drafts superseded; their slots will be drafted again at v2" in bumped.stdout

    bot = weekly.start()
    try:
        wait_for(lambda: len([d for d in weekly.ready() if d.version == 2]) >= 2, 90, "v2 drafts")
    finally:
        bot.send_signal(signal.SIGTERM)
        assert bot.wait(timeout=scaled(30)) == 0

    runs = {slot.run_id("weekly-update") for slot in slots}
    v2 = [d for d in weekly.drafts() if d.version == 2 and d.run_id in runs]
    assert sorted(d.run_id for d in v2) == sorted(runs)  # each bumped slot once, at v2
    assert {r.id: r.state for r in weekly.runs() if r.id in runs} == dict.fromkeys(
        runs, RunState.AWAITING_REVIEW
    )
    assert weekly.model_requests() == len(weekly.drafts())  # one request per draft made
