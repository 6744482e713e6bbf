"""Real `galley run` processes and a slot in real time (docs/design.md §23): a draft
approved ahead of its slot, the bot SIGKILLed before the slot and started again after
it, is published once, at once, even by two replicas starting together; one whose
approval_ttl (counted from the slot) passed meanwhile goes back to review, unpublished.

The slot is the next whole minute far enough ahead of the test's own clock: the outcome
does not depend on the date. The fakes run as their own processes; counted: POSTs and
publications at the fake webhook, and the rows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.ports import SystemClock
from core.setup.config import Config, parse_config
from core.states import DraftState, RunState
from core.store.engine import Store
from tests.fakes.webhook import read_posts, read_publications
from tests.harness import rows
from tests.harness.approvals import approve
from tests.harness.deployments import Processes
from tests.harness.processes import fake_server, galley_run_env, stop, wait_for
from tests.harness.timing import scaled

pytestmark = pytest.mark.slow

# drafting, approving and starting a bot before the slot (about 2 s on an idle machine)
LEAD = timedelta(seconds=scaled(15))
SHORT_TTL = timedelta(seconds=8)
CONFIG = """
[slack]
review_channel = "C0REVIEW"

[defaults]
timezone = "UTC"
model = "claude-test"
draft_ahead = "1m"
pending_limit = 100
misfire_grace = "5m"
call_timeout = "1s"
claim_lease = "20s"
model_timeout = "5s"

[[recipes]]
name = "on-time"
platform = "linkedin"
schedule = "* * * * *"
prompt = "The update for {slot:%H:%M}."
publish = { to = "webhook", url = "HOOK/hook", status_url = "HOOK/status/{key}" }

[[recipes]]
name = "too-late"
platform = "linkedin"
schedule = "* * * * *"
approval_ttl = "TTL"
prompt = "The other update for {slot:%H:%M}."
publish = { to = "webhook", url = "HOOK/hook", status_url = "HOOK/status/{key}" }
"""


@dataclass
class Deployment(Processes):
    config: Config
    hook: Path

    def draft_and_approve(self, recipe: str, wall: str) -> str:
        drafted = self.galley("draft", recipe, "--slot", wall, "--json")
        assert '"drafted"' in drafted.stdout, drafted.stderr
        key = f"linkedin|{recipe}@{wall}|v1"
        answer = approve(self.store, self.config, SystemClock(), key)
        assert answer.accepted, answer.message
        return key

    def publications_of(self, key: str) -> list[str]:
        return [k for k in read_publications(self.hook) if k.startswith(key)]

    def posts_of(self, key: str) -> int:
        return sum(1 for post in read_posts(self.hook) if key in str(post))


@pytest.fixture
def deployment(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    with (
        fake_server("tests.fakes.anthropic_api", tmp_path / "anthropic.json") as anthropic_url,
        fake_server("tests.fakes.slack_api", tmp_path / "slack.json") as slack_url,
        fake_server("tests.fakes.webhook", tmp_path / "webhook.json") as hook_url,
    ):
        ttl = f"{int(SHORT_TTL.total_seconds())}s"
        text = CONFIG.replace("HOOK", hook_url).replace("TTL", ttl)
        path = tmp_path / "galley.toml"
        path.write_text(text)
        env = galley_run_env(path, db_url, anthropic_url=anthropic_url, slack_url=slack_url)
        store = Store(db_url)
        deployed = Deployment(env, store, tmp_path, parse_config(text), tmp_path / "webhook.json")
        yield deployed
        deployed.close()


def test_approved_ahead_killed_before_the_slot_and_restarted_after_it_publishes_once_at_once(
    deployment: Deployment,
) -> None:
    now = datetime.now(UTC)
    slot = (now + LEAD + timedelta(minutes=1)).replace(second=0, microsecond=0)
    wall = f"{slot:%Y-%m-%dT%H:%M}"
    on_time = deployment.draft_and_approve("on-time", wall)
    too_late = deployment.draft_and_approve("too-late", wall)
    assert rows.run_row(deployment.store, f"on-time@{wall}").publish_at == slot

    first = deployment.start()
    try:
        wait_for(lambda: "galley running" in deployment.log_of(1), 30, "the first bot to run")
        assert datetime.now(UTC) < slot - timedelta(seconds=3), "started too late to test"
        assert deployment.publications_of(on_time) == []
    finally:
        first.kill()  # SIGKILL: no shutdown, as a crash
        first.wait(10)
    assert deployment.posts_of(on_time) == 0

    while datetime.now(UTC) < slot + SHORT_TTL + timedelta(seconds=1):
        time.sleep(0.2)  # the slot, and the short approval_ttl after it, pass while down
    started = time.monotonic()
    replicas = [deployment.start(), deployment.start()]  # two replicas start together
    try:
        wait_for(
            lambda: rows.run_row(deployment.store, f"on-time@{wall}").state == RunState.SUCCEEDED,
            30,
            "the on-time run to be published",
        )
        published_after = time.monotonic() - started
        wait_for(
            lambda: (
                rows.run_row(deployment.store, f"too-late@{wall}").state == RunState.AWAITING_REVIEW
            ),
            30,
            "the too-late run to go back to review",
        )
    finally:
        for replica in replicas:
            stop(replica)

    assert published_after < 20  # at once: the first passes after start, not a later slot
    assert deployment.posts_of(on_time) == 1
    assert len(deployment.publications_of(on_time)) == 1
    assert rows.draft_row(deployment.store, on_time).state == DraftState.PUBLISHED
    assert deployment.posts_of(too_late) == 0 and deployment.publications_of(too_late) == []
    assert rows.draft_row(deployment.store, too_late).state == DraftState.READY
