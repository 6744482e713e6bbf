"""A reviewer's redraft survives the bot's death (docs/design.md §22): `galley
run` as a real process receives a signed Redraft submission, is SIGKILLed while the
model call hangs, and a restarted bot takes the claim over and completes the redraft
once: revision 2, never 3, never lost. Counts what the fake Anthropic received and what
the database holds; both backends."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from sqlmodel import col, select

from bot.block_kit import button_value
from core.drafting.service import DraftingService
from core.drafting_policies import AttemptCause, AttemptOutcome, RedraftState
from core.models import AttemptRow, DraftRevisionRow, DraftRow, RedraftRow
from core.setup.config import parse_config
from core.slots.schedule import slot_at_wall
from core.states import DraftState
from core.store.engine import Store
from core.testing import InstantDrafter
from tests.conftest import config_text
from tests.fakes.anthropic_api import hang, read_requests, write_script
from tests.harness.deployments import Processes
from tests.harness.processes import fake_server, galley_run_env, stop, wait_for
from tests.harness.slack_requests import SlackSender, text_input, view_submission

pytestmark = pytest.mark.slow
SECRET = "test-secret"  # galley_run_env's SLACK_SIGNING_SECRET
WALL = "2026-11-23T09:00"
KEY = f"linkedin|weekly-update@{WALL}|v1"
NOTE = "shorter, mention the launch date"
LEASE = {"claim_lease": "20s", "model_timeout": "10s", "heartbeat": "1s", "takeover_after": "3s"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Deployment(Processes):
    anthropic_state: Path

    def start_serving(self) -> tuple[subprocess.Popen[str], str]:
        """`galley run` on a free port, once it answers `/readyz`: the process and the
        URL Slack's events go to."""
        port = free_port()
        proc = self.start(grace=2, env={"GALLEY_HTTP_PORT": str(port)})
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(f"{url}/readyz"), 60, "the bot to be ready")
        return proc, f"{url}/slack/events"

    def model_requests(self) -> list[str]:
        return [json.dumps(r) for r in read_requests(self.anthropic_state)]

    def draft(self) -> DraftRow:
        with self.store.read() as session:
            row = session.get(DraftRow, KEY)
            assert row is not None
            return row

    def redraft_attempts(self) -> list[AttemptRow]:
        with self.store.read() as session:
            query = select(AttemptRow).where(col(AttemptRow.cause) == AttemptCause.REDRAFT)
            return list(session.exec(query.order_by(col(AttemptRow.number))).all())


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def deployed(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    config = tmp_path / "galley.toml"
    text = config_text(pending_limit=100, **LEASE)
    config.write_text(text)
    store = Store(db_url)
    recipe = parse_config(text).recipes["weekly-update"]
    slot = slot_at_wall(recipe, datetime.fromisoformat(WALL))
    drafted = DraftingService(store, InstantDrafter("The first draft."), worker="setup")
    assert drafted.draft_slot(recipe, slot, manual=True).key == KEY
    anthropic_state, slack_state = tmp_path / "anthropic.json", tmp_path / "slack.json"
    with (
        fake_server("tests.fakes.anthropic_api", anthropic_state) as anthropic_url,
        fake_server("tests.fakes.slack_api", slack_state) as slack_url,
    ):
        env = galley_run_env(config, db_url, anthropic_url=anthropic_url, slack_url=slack_url)
        deployed = Deployment(env, store, tmp_path, anthropic_state)
        yield deployed
        deployed.close()


def test_a_bot_killed_during_the_redraft_call_completes_it_once_after_restart(
    deployed: Deployment,
) -> None:
    write_script(deployed.anthropic_state, [hang(60)], text="The shorter draft, 1 December.")
    first, events = deployed.start_serving()
    try:
        submission = view_submission(
            user="U0EDITOR",
            callback_id="galley_redraft_modal",
            private_metadata=button_value(KEY, 1),
            values={"note": {"note": text_input(NOTE)}},
        )
        assert SlackSender(events, SECRET).interactive(submission).status_code == 200
        wait_for(lambda: len(deployed.model_requests()) == 1, 30, "the redraft's model call")
    finally:
        first.send_signal(signal.SIGKILL)  # while the call hangs
        first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL
    assert deployed.draft().revision == 1
    [unfinished] = deployed.redraft_attempts()
    assert unfinished.finished_at is None

    second, _ = deployed.start_serving()
    try:
        wait_for(lambda: deployed.draft().revision == 2, 60, "the redraft after the restart")
        time.sleep(4)  # longer than takeover_after: a second take-over would show by now
    finally:
        stop(second)

    draft = deployed.draft()
    assert (draft.state, draft.revision, draft.text) == (
        DraftState.READY,
        2,
        "The shorter draft, 1 December.",
    )
    requests = deployed.model_requests()
    assert len(requests) == 2 and all(NOTE in r for r in requests)  # killed one, and one more
    outcomes = [a.outcome for a in deployed.redraft_attempts()]
    assert outcomes == [AttemptOutcome.ABANDONED, AttemptOutcome.OK]
    with deployed.store.read() as session:
        [redraft] = session.exec(select(RedraftRow)).all()
        assert redraft.state == RedraftState.DONE
        revisions = session.exec(select(DraftRevisionRow.revision)).all()
        assert sorted(revisions) == [1, 2]
