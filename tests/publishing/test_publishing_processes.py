"""`galley run` crashed at each publishing step boundary, restarted, publishing once
(docs/design.md §9, §20).

The fake webhook runs as its own process and persists what it received, so a crash
of the bot loses nothing on the destination's side. The draft is made with `galley
draft` and approved in the test process against the same database; then `galley run`
starts with `GALLEY_FAILPOINT` set and `os._exit`s at that step, and a restart without
it must finish the run. Counted: POSTs and distinct publications at the fake; the
receipt, the run and the draft in the database. Both backends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

from core.failpoints import FAILPOINT_EXIT_CODE
from core.models import DraftRow, EffectRow, RunRow
from core.ports import SystemClock
from core.setup.config import Config, parse_config
from core.states import DraftState, EffectState, RunState
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.webhook import read_posts, read_publications
from tests.harness import rows
from tests.harness.approvals import approve
from tests.harness.deployments import Processes
from tests.harness.processes import fake_server, galley_run_env, stop, wait_for
from tests.harness.timing import scaled

pytestmark = pytest.mark.slow

RECIPE = "weekly-update"
SLOT = "2026-11-23T09:00"
RUN = f"{RECIPE}@{SLOT}"
KEY = f"linkedin|{RUN}|v1"
HOOK_KEY = f"{KEY}|publish:webhook"
CALL_TIMEOUT = "1s"  # a crashed worker's publish receipt expires after 4 call timeouts


@dataclass
class Deployment(Processes):
    """A config, a database and the three fakes, from which `galley` processes start."""

    config: Config
    hook_state: Path

    def draft_and_approve(self) -> None:
        drafted = self.galley("draft", RECIPE, "--slot", SLOT, "--json")
        assert '"drafted"' in drafted.stdout, drafted.stderr
        answer = approve(self.store, self.config, SystemClock(), KEY)
        assert answer.accepted, answer.message
        assert self.run_row().state == RunState.APPROVED

    def posts(self) -> int:
        return len(read_posts(self.hook_state))

    def publications(self) -> dict[str, dict[str, Any]]:
        return read_publications(self.hook_state)

    def run_row(self) -> RunRow:
        return rows.run_row(self.store, RUN)

    def draft_row(self) -> DraftRow:
        return rows.draft_row(self.store, KEY)

    def receipt(self) -> EffectRow | None:
        with self.store.transaction() as session:
            return session.exec(
                select(EffectRow).where(col(EffectRow.key) == HOOK_KEY)
            ).one_or_none()


@pytest.fixture
def deployment(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    anthropic_state = tmp_path / "anthropic.json"
    slack_state = tmp_path / "slack.json"
    hook_state = tmp_path / "webhook.json"
    with (
        fake_server("tests.fakes.anthropic_api", anthropic_state) as anthropic_url,
        fake_server("tests.fakes.slack_api", slack_state) as slack_url,
        fake_server("tests.fakes.webhook", hook_state) as hook_url,
    ):
        publish = (
            f'publish = {{ to = "webhook", url = "{hook_url}/hook", '
            f'status_url = "{hook_url}/status/{{key}}" }}'
        )
        text = config_text(pending_limit=100, claim_lease="20s", model_timeout="5s")
        text = re.sub(r"^(prompt = .*)$", lambda m: f"{m.group(1)}\n{publish}", text, flags=re.M)
        text = text.replace(
            "[defaults]",
            f'[defaults]\nmisfire_grace = "5m"\ncall_timeout = "{CALL_TIMEOUT}"',
        )
        config_path = tmp_path / "galley.toml"
        config_path.write_text(text)
        env = galley_run_env(config_path, db_url, anthropic_url=anthropic_url, slack_url=slack_url)
        deployed = Deployment(env, Store(db_url), tmp_path, parse_config(text), hook_state)
        yield deployed
        deployed.close()


@pytest.mark.parametrize(
    ("failpoint", "posts_at_crash", "receipt_at_crash"),
    [
        pytest.param("after_publishing_commit", 0, None, id="after_publishing_commit"),
        pytest.param("before_publish_call", 0, EffectState.IN_FLIGHT, id="before_publish_call"),
        pytest.param("after_publish_call", 1, EffectState.IN_FLIGHT, id="after_publish_call"),
    ],
)
def test_a_bot_killed_at_a_publishing_step_publishes_exactly_once_after_a_restart(
    deployment: Deployment,
    failpoint: str,
    posts_at_crash: int,
    receipt_at_crash: EffectState | None,
) -> None:
    deployment.draft_and_approve()

    crashed = deployment.start(failpoint=failpoint)
    assert crashed.wait(timeout=scaled(60)) == FAILPOINT_EXIT_CODE, deployment.log_of(1)
    assert f"failpoint {failpoint} reached" in deployment.log_of(1)
    assert deployment.posts() == posts_at_crash
    assert len(deployment.publications()) == posts_at_crash
    assert deployment.run_row().state == RunState.PUBLISHING
    receipt = deployment.receipt()
    assert (receipt.state if receipt else None) == receipt_at_crash

    restarted = deployment.start()
    try:
        wait_for(
            lambda: deployment.run_row().state == RunState.SUCCEEDED,
            60,
            "the restarted bot to finish the run",
        )
    finally:
        stop(restarted)
    assert restarted.returncode == 0, deployment.log_of(2)

    assert deployment.posts() == 1  # after the POST landed: found, not sent again
    publications = deployment.publications()
    assert list(publications) == [HOOK_KEY]
    assert publications[HOOK_KEY]["id"] == "pub_1"
    receipt = deployment.receipt()
    assert receipt is not None
    assert (receipt.state, receipt.external_id) == (EffectState.SUCCEEDED, "pub_1")
    if posts_at_crash:  # the restart asked the destination before anything else
        assert receipt.result is not None and '"found": true' in receipt.result
    assert deployment.draft_row().state == DraftState.PUBLISHED


def test_a_persons_post_killed_after_the_platforms_200_is_published_once_after_a_restart(
    deployment: Deployment,
) -> None:
    """A person's post (docs/design.md §37), written with `galley post`, goes through the
    same publishing path: SIGKILL-like exit right after the webhook's 200, then a restart
    finds it and sends nothing again."""
    text_file = deployment.logs / "post.txt"
    text_file.write_text("We launch on Monday.")
    written = deployment.galley(
        "post", RECIPE, "--text-file", str(text_file), "--as", "U0ADMIN", "--json"
    )
    assert written.returncode == 0, written.stderr
    [run_id] = json.loads(written.stdout)["added"]
    key = rows.run_row(deployment.store, run_id).draft_key or ""
    assert approve(deployment.store, deployment.config, SystemClock(), key).accepted

    crashed = deployment.start(failpoint="after_publish_call")
    assert crashed.wait(timeout=scaled(60)) == FAILPOINT_EXIT_CODE, deployment.log_of(1)
    assert deployment.posts() == 1
    restarted = deployment.start()
    try:
        wait_for(
            lambda: rows.run_row(deployment.store, run_id).state == RunState.SUCCEEDED,
            60,
            "the restarted bot to finish the post",
        )
    finally:
        stop(restarted)
    assert deployment.posts() == 1
    assert list(deployment.publications()) == [f"{key}|publish:webhook"]
    assert rows.draft_row(deployment.store, key).state == DraftState.PUBLISHED
