"""Batch drafting across real `galley` processes ended by SIGKILL (docs/design.md
§21): a batch whose create was sent but whose id was never stored, and a batch whose
holder died while it waited for results, each end as one batch and one stored draft,
with no second request to the model.

The fakes run as their own processes with state files, so what they received survives
every kill; counted: batches the fake created, `/v1/messages` calls, and the rows.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from core.api.galley import Galley
from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting_policies import DraftOutcome
from core.failpoints import FAILPOINT_EXIT_CODE, Failpoint
from core.models import BatchRow, DraftRow
from core.setup.config import parse_config
from core.states import BatchState, DraftState
from core.store.engine import Store
from tests.fakes.anthropic_api import read_requests
from tests.fakes.anthropic_batches import read_batches, write_state
from tests.harness.deployments import Processes
from tests.harness.processes import fake_server, galley_run_env, wait_for
from tests.harness.timing import scaled

pytestmark = pytest.mark.slow

WALL = "2026-11-23T09:00"  # a person's request for a past slot: no schedule fires it
CONFIG = """
[slack]
review_channel = "C0REVIEW"

[defaults]
timezone = "UTC"
model = "claude-test"
drafting = "batch"
batch_gather = "1s"
batch_deadline = "1h"
call_timeout = "1s"
heartbeat = "1s"
takeover_after = "2s"
pending_limit = 100

[[recipes]]
name = "weekly-update"
platform = "linkedin"
schedule = "0 9 * * mon"
prompt = "Write the weekly update for {slot:%d %B %Y}."
"""
KEY = f"linkedin|weekly-update@{WALL}|v1"


@dataclass
class Deployment(Processes):
    anthropic: Path
    asked: set[str] = field(default_factory=lambda: {f"weekly-update@{WALL}"}, kw_only=True)

    def ask_for_a_batch(self) -> None:
        asked = self.galley("draft", "weekly-update", "--slot", WALL, "--batch", "--json")
        assert '"batched"' in asked.stdout, asked.stdout + asked.stderr

    def operator(self) -> Galley:
        drafter = AnthropicDrafter("test-key", self.env["ANTHROPIC_BASE_URL"])
        return Galley(parse_config(CONFIG), self.store, drafter=drafter)

    def batches(self) -> list[BatchRow]:
        with self.store.read() as session:
            return list(session.exec(select(BatchRow)).all())

    def ready(self) -> list[DraftRow]:
        """Ready drafts of the slots the test asked for: a real Monday 09:00 passing
        while the bots run would fire the schedule and add one of its own."""
        with self.store.read() as session:
            drafts = session.exec(select(DraftRow).where(DraftRow.state == DraftState.READY))
            return [d for d in drafts.all() if d.run_id in self.asked]

    def created(self) -> int:
        return len(read_batches(self.anthropic))

    def sync_calls(self) -> int:
        return sum(1 for r in read_requests(self.anthropic) if r["path"] == "/v1/messages")


@pytest.fixture
def deployment(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    state = tmp_path / "anthropic.json"
    with (
        fake_server("tests.fakes.anthropic_api", state) as anthropic_url,
        fake_server("tests.fakes.slack_api", tmp_path / "slack.json") as slack_url,
    ):
        path = tmp_path / "galley.toml"
        path.write_text(CONFIG)
        env = galley_run_env(path, db_url, anthropic_url=anthropic_url, slack_url=slack_url)
        deployed = Deployment(env, Store(db_url), tmp_path, state)
        yield deployed
        deployed.close()


def test_killed_after_the_create_was_sent_before_its_id_was_stored(
    deployment: Deployment,
) -> None:
    deployment.ask_for_a_batch()
    first = deployment.start(Failpoint.AFTER_BATCH_CREATE)
    assert first.wait(scaled(60)) == FAILPOINT_EXIT_CODE  # dies the instant the API answered
    [row] = deployment.batches()
    assert (row.state, row.batch_id) == (BatchState.SUBMITTING, None)
    assert deployment.created() == 1

    second = deployment.start()
    try:
        wait_for(  # the answer is stored, then the batch ended: wait for both
            lambda: (
                len(deployment.ready()) == 1
                and [b.state for b in deployment.batches()] == [BatchState.ENDED]
            ),
            60,
            "the draft to be stored and its batch ended",
        )
    finally:
        second.kill()
        second.wait(scaled(10))

    assert deployment.created() == 1  # found again, never sent twice
    [row] = deployment.batches()
    assert (row.state, row.batch_id) == (
        BatchState.ENDED,
        read_batches(deployment.anthropic)[0]["id"],
    )
    assert [d.key for d in deployment.ready()] == [KEY]
    assert deployment.sync_calls() == 0


def test_killed_while_waiting_for_results_the_next_start_stores_the_answer(
    deployment: Deployment,
) -> None:
    write_state(deployment.anthropic, batch_hold=True)
    deployment.ask_for_a_batch()
    first = deployment.start()
    try:
        wait_for(
            lambda: [b.state for b in deployment.batches()] == [BatchState.WAITING],
            60,
            "the batch to be created",
        )
    finally:
        first.kill()  # SIGKILL while the batch waits: no shutdown
        first.wait(scaled(10))
    write_state(deployment.anthropic, batch_hold=False)

    replicas = [deployment.start(), deployment.start()]  # two replicas race for its lease
    try:
        wait_for(lambda: len(deployment.ready()) == 1, 60, "the draft to be stored")
        wait_for(
            lambda: [b.state for b in deployment.batches()] == [BatchState.ENDED],
            30,
            "the batch to be closed",
        )
    finally:
        for replica in replicas:
            replica.kill()
            replica.wait(scaled(10))

    assert deployment.created() == 1
    assert deployment.sync_calls() == 0
    assert [d.key for d in deployment.ready()] == [KEY]


CHAOS_SLOTS = 20
CHAOS_WAVES = 5


def test_two_replicas_killed_at_random_pay_once_per_delivered_draft(
    deployment: Deployment,
) -> None:
    """The chaos schedule for batches: two replicas, SIGKILLed at random moments while
    20 slots are asked for in five waves (so several batches are gathered, created,
    polled and stored while replicas die). Model requests per delivered draft, counting
    each entry of each batch the API created and each synchronous call, is 1.00."""
    rng = random.Random(24)
    write_state(deployment.anthropic, batch_looks=2)  # two in_progress answers per batch
    mondays = [datetime(2026, 11, 23, 9) - timedelta(weeks=n) for n in range(CHAOS_SLOTS)]
    walls = [f"{monday:%Y-%m-%dT%H:%M}" for monday in mondays]
    deployment.asked = {f"weekly-update@{wall}" for wall in walls}
    replicas = [deployment.start(), deployment.start()]
    kills = 0
    try:
        for wave in range(CHAOS_WAVES):
            for wall in walls[wave::CHAOS_WAVES]:  # as `galley draft --batch`, in-process
                asked = deployment.operator().draft("weekly-update", wall, batch=True)
                assert asked.outcome == DraftOutcome.BATCHED, asked
            time.sleep(rng.uniform(1.0, 3.0))  # a batch_gather or more
            victim = rng.randrange(len(replicas))
            replicas[victim].kill()  # SIGKILL, wherever it was
            replicas[victim].wait(scaled(10))
            kills += 1
            replicas[victim] = deployment.start()
        wait_for(lambda: len(deployment.ready()) == CHAOS_SLOTS, 120, "every slot's draft")
    finally:
        for replica in replicas:
            replica.kill()
            replica.wait(scaled(10))

    drafts = deployment.ready()
    assert sorted(d.run_id for d in drafts) == sorted(f"weekly-update@{w}" for w in walls)
    entries = sum(len(batch["requests"]) for batch in read_batches(deployment.anthropic))
    requests_per_draft = (entries + deployment.sync_calls()) / len(drafts)
    print(
        f"chaos: {kills} kills, {len(read_batches(deployment.anthropic))} batches, "
        f"{entries} entries, {deployment.sync_calls()} sync calls, "
        f"{requests_per_draft:.2f} model requests per delivered draft"
    )
    assert requests_per_draft == 1.0
