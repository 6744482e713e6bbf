"""Real `galley draft` processes against the fake Anthropic API, killed at each step.

docs/design.md §4 and §20: every test starts the console script as a separate process
(several at once, or crashed at a named failpoint, or SIGKILLed mid-call), restarts it,
and checks the final state on SQLite and PostgreSQL: how many requests the fake
received, which draft rows exist and in what state, and the attempts ledger. Never logs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from sqlmodel import col, select

from core.drafting_policies import AttemptOutcome, DraftOutcome
from core.failpoints import FAILPOINT_EXIT_CODE
from core.models import AttemptRow, DraftRow, RunRow
from core.states import DraftState, RunState
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.anthropic_api import hang, read_requests, write_script
from tests.harness.launcher import LAUNCHER, LaunchedProcess
from tests.harness.processes import fake_server, galley_env
from tests.harness.timing import scaled

pytestmark = pytest.mark.slow


RECIPE = "weekly-update"
SLOT = "2026-11-23T09:00"
RUN = "weekly-update@2026-11-23T09:00"
KEY = "linkedin|weekly-update@2026-11-23T09:00|v1"
# A short lease, so a dead worker's claim can be taken over within the test. The test
# that must see a dead worker's claim still live from a freshly started process gets a
# lease no loaded machine outlasts (a `galley` process took over 6 s at load 7), and
# lapses it by hand afterwards instead of waiting two minutes.
LEASE = {"claim_lease": "3s", "model_timeout": "2s", "heartbeat": "1s", "takeover_after": "3s"}
ROOMY_LEASE = {
    "claim_lease": "120s",
    "model_timeout": "2s",
    "heartbeat": "1s",
    "takeover_after": "120s",
}
RUN_TIMEOUT = 60.0  # seconds any one `galley draft` process may take

T = TypeVar("T")


# --- the fake Anthropic API, as its own process ----------------------------------------


@dataclass(frozen=True)
class FakeProcess:
    url: str
    state_file: Path

    def requests(self) -> list[dict[str, Any]]:
        return read_requests(self.state_file)


@pytest.fixture
def fake_api(tmp_path: Path) -> Iterator[FakeProcess]:
    state_file = tmp_path / "fake-anthropic.json"
    with fake_server("tests.fakes.anthropic_api", state_file) as url:
        yield FakeProcess(url, state_file)


# --- `galley draft` processes -----------------------------------------------------------


@dataclass
class Galley:
    """Runs `galley draft RECIPE --slot SLOT --json` with one config and one database."""

    env: dict[str, str]
    cwd: Path

    def start(self, failpoint: str | None = None) -> LaunchedProcess:
        env = dict(self.env)
        if failpoint is not None:
            env["GALLEY_FAILPOINT"] = failpoint
        args = ["draft", RECIPE, "--slot", SLOT, "--json"]
        return LAUNCHER.captured(args, env, self.cwd.parent, cwd=self.cwd)

    def run(self, failpoint: str | None = None) -> Finished:
        return finish(self.start(failpoint))


@dataclass(frozen=True)
class Finished:
    returncode: int
    result: dict[str, Any] | None  # the --json document, None when nothing was printed
    stderr: str

    @property
    def outcome(self) -> str | None:
        return None if self.result is None else self.result["outcome"]


def finish(proc: LaunchedProcess, timeout: float = RUN_TIMEOUT) -> Finished:
    try:
        stdout, stderr = proc.communicate(timeout=scaled(timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    result = json.loads(stdout) if stdout.strip() else None
    if result is not None:
        assert result["run"] == RUN and result["key"] == KEY, result
    return Finished(proc.returncode, result, stderr)


def make_galley(tmp_path: Path, db_url: str, fake: FakeProcess, **config: str) -> Galley:
    config_file = tmp_path / "galley.toml"
    config_file.write_text(config_text(**config))
    env = galley_env(
        GALLEY_CONFIG=str(config_file),
        GALLEY_DATABASE_URL=db_url,
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=fake.url,
    )
    workdir = tmp_path / "cwd"
    workdir.mkdir(exist_ok=True)
    return Galley(env, workdir)


# --- reading the database ---------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    drafts: list[DraftRow]
    attempts: list[AttemptRow]
    run: RunRow | None

    @property
    def draft(self) -> DraftRow:
        assert len(self.drafts) == 1, self.drafts
        return self.drafts[0]

    @property
    def attempt_outcomes(self) -> list[str | None]:
        return [a.outcome for a in self.attempts]


def snapshot(db_url: str) -> Snapshot:
    store = Store(db_url)
    try:
        with store.transaction() as session:
            drafts = list(session.exec(select(DraftRow).order_by(col(DraftRow.key))).all())
            attempts = list(session.exec(select(AttemptRow).order_by(col(AttemptRow.number))).all())
            run = session.exec(select(RunRow).where(col(RunRow.id) == RUN)).one_or_none()
        return Snapshot(drafts, attempts, run)
    finally:
        store.dispose()


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 20.0) -> T:
    deadline = time.monotonic() + scaled(timeout)
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def wait_past(instant: datetime) -> None:
    """Sleep until `instant` (aware UTC) has passed, plus a little."""
    remaining = (instant - datetime.now(UTC)).total_seconds()
    if remaining > 0:
        time.sleep(remaining)
    time.sleep(0.2)


def wait_past_lease(db_url: str) -> None:
    lease_until = snapshot(db_url).draft.lease_until
    assert lease_until is not None
    wait_past(lease_until)


def lapse_lease(db_url: str) -> None:
    """The claim's lease ends a second ago, as if its whole time had passed."""
    store = Store(db_url)
    try:
        with store.transaction() as session:
            session.execute(
                sa.update(DraftRow)
                .where(col(DraftRow.key) == KEY)
                .values(lease_until=datetime.now(UTC) - timedelta(seconds=1))
            )
    finally:
        store.dispose()


def assert_one_ready_draft(db_url: str) -> Snapshot:
    state = snapshot(db_url)
    draft = state.draft
    assert draft.key == KEY
    assert draft.state == DraftState.READY
    assert draft.text and draft.text_hash
    assert (draft.claimed_by, draft.lease_until) == (None, None)
    assert state.run is not None and state.run.state == RunState.AWAITING_REVIEW
    assert state.run.draft_key == KEY
    return state


# --- tests ------------------------------------------------------------------------------


def test_galley_draft_twice_makes_one_model_call(
    tmp_path: Path, db_url: str, fake_api: FakeProcess
) -> None:
    galley = make_galley(tmp_path, db_url, fake_api, **LEASE)

    first = galley.run()
    second = galley.run()

    assert (first.returncode, first.outcome) == (0, DraftOutcome.DRAFTED), first.stderr
    assert (second.returncode, second.outcome) == (0, DraftOutcome.EXISTS), second.stderr
    assert len(fake_api.requests()) == 1
    state = assert_one_ready_draft(db_url)
    assert state.attempt_outcomes == [AttemptOutcome.OK]


def test_ten_concurrent_galley_draft_processes_make_one_model_call(
    tmp_path: Path, db_url: str, fake_api: FakeProcess
) -> None:
    write_script(fake_api.state_file, [], delay=0.5)  # slow answers: the processes overlap
    galley = make_galley(tmp_path, db_url, fake_api)

    procs = [galley.start() for _ in range(10)]
    results = [finish(proc) for proc in procs]

    assert [r.returncode for r in results] == [0] * 10, [r.stderr for r in results]
    outcomes = [r.outcome for r in results]
    assert set(outcomes) <= {DraftOutcome.DRAFTED, DraftOutcome.EXISTS, DraftOutcome.IN_PROGRESS}
    assert outcomes.count(DraftOutcome.DRAFTED) == 1, outcomes
    assert len(fake_api.requests()) == 1
    state = assert_one_ready_draft(db_url)
    assert state.attempt_outcomes == [AttemptOutcome.OK]


def test_killed_after_claim_commit_the_claim_is_taken_over_after_its_lease(
    tmp_path: Path, db_url: str, fake_api: FakeProcess
) -> None:
    galley = make_galley(tmp_path, db_url, fake_api, **ROOMY_LEASE)

    crashed = galley.run(failpoint="after_claim_commit")

    assert crashed.returncode == FAILPOINT_EXIT_CODE, crashed.stderr
    claimed = snapshot(db_url).draft
    assert (claimed.key, claimed.state) == (KEY, DraftState.CLAIMED)
    assert claimed.claimed_by and claimed.lease_until is not None

    while_live = galley.run()

    assert claimed.lease_until > datetime.now(UTC), "lease ran out before the check: too slow"
    assert (while_live.returncode, while_live.outcome) == (0, DraftOutcome.IN_PROGRESS)
    assert fake_api.requests() == []
    assert snapshot(db_url).draft.claimed_by == claimed.claimed_by  # not taken over

    lapse_lease(db_url)  # as if its 120 s had passed: the dead worker never renews it
    after_lease = galley.run()

    assert (after_lease.returncode, after_lease.outcome) == (0, DraftOutcome.DRAFTED)
    assert len(fake_api.requests()) == 1
    state = assert_one_ready_draft(db_url)
    assert state.attempt_outcomes == [AttemptOutcome.OK]


def test_killed_while_the_model_call_is_in_flight_the_call_is_abandoned_and_redone(
    tmp_path: Path, db_url: str, fake_api: FakeProcess
) -> None:
    write_script(fake_api.state_file, [hang(10)])  # accept the first request, never answer
    galley = make_galley(tmp_path, db_url, fake_api, **LEASE)

    proc = galley.start()
    try:
        wait_for("the model call to reach the fake", fake_api.requests)
    finally:
        proc.kill()  # SIGKILL while the request is in flight
        killed = finish(proc)

    assert killed.returncode == -signal.SIGKILL
    during = snapshot(db_url)
    assert during.draft.state == DraftState.CLAIMED and during.draft.text is None
    [unfinished] = during.attempts
    assert (unfinished.outcome, unfinished.finished_at) == (None, None)

    wait_past_lease(db_url)
    rerun = galley.run()

    assert (rerun.returncode, rerun.outcome) == (0, DraftOutcome.DRAFTED), rerun.stderr
    assert len(fake_api.requests()) == 2
    state = assert_one_ready_draft(db_url)
    assert state.attempt_outcomes == [AttemptOutcome.ABANDONED, AttemptOutcome.OK]
    assert [a.id for a in state.attempts] == [f"{RUN}#1", f"{RUN}#2"]
    assert state.attempts[0].finished_at is not None
    assert state.attempts[0].worker != state.attempts[1].worker


def test_killed_after_the_model_answered_before_storing_the_answer_is_paid_for_twice(
    tmp_path: Path, db_url: str, fake_api: FakeProcess
) -> None:
    galley = make_galley(tmp_path, db_url, fake_api, **LEASE)

    crashed = galley.run(failpoint="after_model_reply")

    assert crashed.returncode == FAILPOINT_EXIT_CODE, crashed.stderr
    assert len(fake_api.requests()) == 1
    during = snapshot(db_url)
    assert during.draft.state == DraftState.CLAIMED
    assert (during.draft.text, during.draft.text_hash) == (None, None)
    assert during.attempt_outcomes == [None]

    wait_past_lease(db_url)
    rerun = galley.run()

    assert (rerun.returncode, rerun.outcome) == (0, DraftOutcome.DRAFTED), rerun.stderr
    assert len(fake_api.requests()) == 2
    state = assert_one_ready_draft(db_url)
    assert state.attempt_outcomes == [AttemptOutcome.ABANDONED, AttemptOutcome.OK]


def test_killed_after_draft_commit_the_draft_stands_and_is_not_redone(
    tmp_path: Path, db_url: str, fake_api: FakeProcess
) -> None:
    galley = make_galley(tmp_path, db_url, fake_api, **LEASE)

    crashed = galley.run(failpoint="after_draft_commit")

    assert crashed.returncode == FAILPOINT_EXIT_CODE, crashed.stderr
    assert len(fake_api.requests()) == 1
    stored = assert_one_ready_draft(db_url).draft  # ready, no claim left to take over

    rerun = galley.run()

    assert (rerun.returncode, rerun.outcome) == (0, DraftOutcome.EXISTS), rerun.stderr
    assert len(fake_api.requests()) == 1
    state = assert_one_ready_draft(db_url)
    assert state.draft.text == stored.text
    assert state.attempt_outcomes == [AttemptOutcome.OK]
