"""A real `galley draft` killed during its redraft call: the slot is never re-drafted twice.

The attempts ledger marks the redraft before the call, so the process that takes the
expired claim over reads it there and keeps its own answer. Real processes against the
fake Anthropic API as its own process, on SQLite and PostgreSQL; counts requests and rows.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

from core.drafting_policies import AttemptOutcome
from core.models import AttemptRow, DraftRow
from core.ports import SystemClock
from core.setup.config import parse_config
from core.states import DraftState
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.anthropic_api import hang, ok, read_requests, write_script
from tests.harness.approvals import approve
from tests.harness.launcher import LAUNCHER, LaunchedProcess
from tests.harness.posts import REWORDED, SEEN
from tests.harness.processes import fake_server, galley_env
from tests.harness.timing import scaled

pytestmark = pytest.mark.slow

RECIPE = "weekly-update"
EARLIER, LATER = "2026-11-16T09:00", "2026-11-23T09:00"
EARLIER_KEY = f"linkedin|{RECIPE}@{EARLIER}|v1"
LATER_RUN = f"{RECIPE}@{LATER}"
LATER_KEY = f"linkedin|{LATER_RUN}|v1"
RUN_TIMEOUT = 60.0


def galley_draft(env: dict[str, str], cwd: Path, slot: str) -> LaunchedProcess:
    return LAUNCHER.captured(["draft", RECIPE, "--slot", slot, "--json"], env, cwd, cwd=cwd)


def outcome(proc: LaunchedProcess) -> Any:
    stdout, stderr = proc.communicate(timeout=scaled(RUN_TIMEOUT))
    assert stdout.strip(), stderr
    return json.loads(stdout)["outcome"]


def wait_for_requests(state_file: Path, count: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while len(read_requests(state_file)) < count:
        assert time.monotonic() < deadline, f"the fake never received {count} requests"
        time.sleep(0.05)


def test_a_worker_killed_mid_redraft_is_taken_over_without_a_second_redraft(
    tmp_path: Path, db_url: str
) -> None:
    text = config_text(
        claim_lease="3s", model_timeout="2s", heartbeat="1s", takeover_after="3s"
    ).replace("[defaults]\n", '[defaults]\non_similar = "redraft"\n')
    (tmp_path / "galley.toml").write_text(text)
    state_file = tmp_path / "fake-anthropic.json"
    with fake_server("tests.fakes.anthropic_api", state_file) as url:
        env = galley_env(
            GALLEY_CONFIG=str(tmp_path / "galley.toml"),
            GALLEY_DATABASE_URL=db_url,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=url,
        )
        write_script(state_file, [ok(text=SEEN)])
        assert outcome(galley_draft(env, tmp_path, EARLIER)) == "drafted"
        store = Store(db_url)
        approved = approve(store, parse_config(text), SystemClock(), EARLIER_KEY)
        assert approved.accepted

        write_script(state_file, [ok(text=REWORDED), hang(30)])
        doomed = galley_draft(env, tmp_path, LATER)
        wait_for_requests(state_file, 3)  # the earlier week, the answer, the redraft call
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=scaled(10))
        time.sleep(3.5)  # past the dead worker's lease

        write_script(state_file, [ok(text=REWORDED)])
        assert outcome(galley_draft(env, tmp_path, LATER)) == "drafted"
        requests = read_requests(state_file)

    with store.transaction() as session:
        attempts = session.exec(
            select(AttemptRow)
            .where(col(AttemptRow.run_id) == LATER_RUN)
            .order_by(col(AttemptRow.number))
        ).all()
        draft = session.get_one(DraftRow, LATER_KEY)
        ledger = [(a.outcome, a.redraft) for a in attempts]
        stored = (draft.state, draft.text, draft.similar_to)
    store.dispose()
    assert len(requests) == 4  # no second redraft after the takeover
    assert ledger == [
        (AttemptOutcome.OK, False),
        (AttemptOutcome.ABANDONED, True),
        (AttemptOutcome.OK, False),
    ]
    assert stored == (DraftState.READY, REWORDED, EARLIER_KEY)
