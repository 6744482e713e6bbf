"""Real `galley poll` processes over a real feed served by HTTP and the fake Anthropic API,
killed between a poll and the claim and between the claim and the draft, and two polling at
once (docs/design.md §29, §20). Final state on SQLite and PostgreSQL: the model's requests,
the runs and the drafts; never logs."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlmodel import col, select

from core.failpoints import FAILPOINT_EXIT_CODE
from core.models import DraftRow, RunRow
from core.policies import SkipReason
from core.states import DraftState, RunState
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.anthropic_api import hang, read_requests, write_script
from tests.fakes.web import RSS_TYPE, FakeWeb
from tests.harness.launcher import LAUNCHER, LaunchedProcess
from tests.harness.processes import fake_server, galley_env, wait_for
from tests.harness.slow_marks import starts_a_server
from tests.harness.timing import scaled
from tests.sources.feed_documents import Entry, rss2

pytestmark = pytest.mark.slow

FEED = "/feed.xml"
RUN_TIMEOUT = 90.0
ROOMY_LEASE = {
    "claim_lease": "120s",
    "model_timeout": "2s",
    "heartbeat": "1s",
    "takeover_after": "120s",
}
NOW = datetime(2020, 6, 1, 12, 0, tzinfo=UTC)  # entries long past, whatever day it is


def entry(n: int) -> Entry:
    return Entry(
        guid=f"https://blog.example.com/?p={n}",
        title=f"Post {n}",
        link=f"https://blog.example.com/post-{n}",
        published=NOW - timedelta(hours=100 - n),
        html=f"<p>What happened in post {n}.</p>",
    )


def document(*numbers: int) -> str:
    return rss2([entry(n) for n in sorted(numbers, reverse=True)])


@dataclass(frozen=True)
class World:
    web: FakeWeb
    anthropic: str
    anthropic_state: Path
    config: Path
    db_url: str
    cwd: Path

    def serve(self, *numbers: int) -> None:
        self.web.publish(FEED, document(*numbers), RSS_TYPE)

    def requests(self) -> list[dict[str, Any]]:
        return read_requests(self.anthropic_state)

    def start(self, failpoint: str | None = None) -> LaunchedProcess:
        env = galley_env(
            GALLEY_CONFIG=str(self.config),
            GALLEY_DATABASE_URL=self.db_url,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=self.anthropic,
        )
        if failpoint is not None:
            env["GALLEY_FAILPOINT"] = failpoint
        args = ["poll", "weekly-update", "--json"]
        return LAUNCHER.captured(args, env, self.cwd.parent, cwd=self.cwd)

    def poll(self, failpoint: str | None = None) -> tuple[int, dict[str, Any] | None, str]:
        return finish(self.start(failpoint))


def finish(proc: LaunchedProcess) -> tuple[int, dict[str, Any] | None, str]:
    try:
        stdout, stderr = proc.communicate(timeout=scaled(RUN_TIMEOUT))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return proc.returncode, json.loads(stdout) if stdout.strip() else None, stderr


@pytest.fixture
@starts_a_server
def world(tmp_path: Path, db_url: str) -> Iterator[World]:
    state = tmp_path / "fake-anthropic.json"
    with FakeWeb() as web, fake_server("tests.fakes.anthropic_api", state) as anthropic:
        config = tmp_path / "galley.toml"
        text = config_text(pending_limit=10, **ROOMY_LEASE).replace("0 9 * * mon", "*/5 * * * *")
        config.write_text(
            text + f'trigger = "items"\nsource = {{ kind = "feed", url = "{web.url}{FEED}" }}\n'
        )
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        yield World(web, anthropic, state, config, db_url, cwd)


def rows(db_url: str) -> tuple[list[RunRow], list[DraftRow]]:
    store = Store(db_url)
    try:
        with store.read() as session:
            runs = list(session.exec(select(RunRow).order_by(col(RunRow.id))).all())
            drafts = list(session.exec(select(DraftRow).order_by(col(DraftRow.key))).all())
        return runs, drafts
    finally:
        store.dispose()


def lapse_leases(db_url: str) -> None:
    """Every claim's lease ended a second ago, as if its whole time had passed."""
    store = Store(db_url)
    try:
        with store.transaction() as session:
            session.execute(
                sa.update(DraftRow)
                .where(col(DraftRow.state) == DraftState.CLAIMED)
                .values(lease_until=datetime.now(UTC) - timedelta(seconds=1))
            )
    finally:
        store.dispose()


def first_poll(world: World) -> None:
    world.serve(1, 2)
    code, _, stderr = world.poll()
    assert code == 0, stderr
    runs, drafts = rows(world.db_url)
    assert {run.reason for run in runs} == {SkipReason.BACKFILL} and not drafts


def test_killed_between_the_poll_and_the_claim_each_new_item_is_drafted_once(
    world: World,
) -> None:
    first_poll(world)
    world.serve(1, 2, 3, 4)

    code, _, stderr = world.poll(failpoint="after_poll_commit")

    assert code == FAILPOINT_EXIT_CODE, stderr
    runs, drafts = rows(world.db_url)
    assert [r.state for r in runs].count(RunState.PENDING) == 2 and not drafts
    assert world.requests() == []
    for _ in range(2):  # restarted, then polled once more: nothing twice
        code, _, stderr = world.poll()
        assert code == 0, stderr
    runs, drafts = rows(world.db_url)
    assert len(world.requests()) == 2
    assert sorted(d.state for d in drafts) == [DraftState.READY, DraftState.READY]
    assert len(runs) == 4


def test_killed_between_the_claim_and_the_draft_the_claim_is_taken_over_once(
    world: World,
) -> None:
    first_poll(world)
    world.serve(1, 2, 3)

    code, _, stderr = world.poll(failpoint="after_claim_commit")

    assert code == FAILPOINT_EXIT_CODE, stderr
    _, [claimed] = rows(world.db_url)
    assert claimed.state == DraftState.CLAIMED and world.requests() == []
    code, result, stderr = world.poll()  # the dead holder's lease is still live
    assert code == 0, stderr
    assert result is not None and [d["outcome"] for d in result["drafted"]] == ["in_progress"]
    assert world.requests() == []
    lapse_leases(world.db_url)  # as if its 120 s had passed

    code, _, stderr = world.poll()

    assert code == 0, stderr
    _, [drafted] = rows(world.db_url)
    assert drafted.state == DraftState.READY and len(world.requests()) == 1


def test_two_replicas_polling_at_once_draft_each_new_item_once(world: World) -> None:
    first_poll(world)
    world.serve(1, 2, 3, 4, 5)

    procs = [world.start(), world.start()]
    finished = [finish(proc) for proc in procs]

    assert [code for code, _, _ in finished] == [0, 0], [err for _, _, err in finished]
    runs, drafts = rows(world.db_url)
    assert len(runs) == 5 and len(drafts) == 3
    assert len(world.requests()) == 3


def test_a_real_feed_that_reorders_reserves_reissues_and_edits_drafts_each_item_once(
    world: World,
) -> None:
    first_poll(world)
    reissued = Entry("urn:uuid:4-again", "Post 4", entry(4).link, entry(4).published, "<p>4</p>")
    edited = Entry(entry(3).guid, "Post 3 (updated)", entry(3).link, entry(3).published, "<p>!</p>")
    documents = [
        document(1, 2, 3, 4),  # two new entries
        rss2([entry(n) for n in (1, 2, 3, 4)]),  # the same, oldest first
        document(3, 4),  # old ones dropped ...
        document(1, 2, 3, 4),  # ... and served again
        rss2([reissued, entry(3), entry(2), entry(1)]),  # 4 under a new GUID
        rss2([entry(4), edited, entry(2), entry(1)]),  # 3 edited after it was drafted
    ]
    for served in documents:
        world.web.publish(FEED, served, RSS_TYPE)
        code, _, stderr = world.poll()
        assert code == 0, stderr

    runs, drafts = rows(world.db_url)
    assert len(runs) == 4 and len(drafts) == 2 and len(world.requests()) == 2


def test_sigkilled_while_an_items_model_call_is_in_flight_the_item_is_drafted_once(
    world: World,
) -> None:
    first_poll(world)
    world.serve(1, 2, 3)
    write_script(world.anthropic_state, [hang(30)])  # accept the request, never answer

    proc = world.start()
    try:
        wait_for(lambda: bool(world.requests()), 30, "the model call to reach the fake")
    finally:
        proc.kill()  # SIGKILL mid-call: no cleanup, the claim stays as it was
        code, _, _ = finish(proc)
    assert code == -signal.SIGKILL
    lapse_leases(world.db_url)  # as if its 120 s had passed

    code, _, stderr = world.poll()

    assert code == 0, stderr
    _, [drafted] = rows(world.db_url)
    assert drafted.state == DraftState.READY
    assert len(world.requests()) == 2  # the abandoned call, and the one that drafted
