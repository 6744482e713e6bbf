"""A real `galley run` dies right after storing its run's snapshot; another process takes
the run over and drafts from that snapshot, though the source changed meanwhile
(docs/design.md §27, §20). Asserts on what the model fake received and on the rows."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import col, select

from core.failpoints import FAILPOINT_EXIT_CODE, Failpoint
from core.models import DraftRow, RunRow, SnapshotItemRow, SourceSnapshotRow
from core.states import DraftState, RunState
from core.store.engine import Store
from core.store.leases import database_now
from tests.conftest import config_text
from tests.fakes.anthropic_api import read_requests
from tests.harness.deployments import Processes
from tests.harness.processes import fake_server, galley_run_env, stop, wait_for
from tests.harness.slow_marks import starts_a_server
from tests.harness.timing import scaled

pytestmark = pytest.mark.slow

SOURCES = """
prompt = "Write the update for {slot:%d %B %Y %H:%M}."
window = "7d"
sources = [{ kind = "file", path = "notes/*.md", name = "notes" }]
"""


@pytest.fixture
@starts_a_server
def deployment(tmp_path: Path, db_url: str) -> Iterator[tuple[Processes, Path]]:
    config = tmp_path / "galley.toml"
    text = config_text(
        pending_limit=100,
        claim_lease="20s",
        model_timeout="5s",
        heartbeat="1s",
        takeover_after="3s",
    ).replace('"0 9 * * mon"', '"* * * * *"')
    text = text.replace('prompt = "Write the weekly update for {slot:%d %B %Y}."\n', "")
    config.write_text(text.replace("[defaults]", '[defaults]\nmisfire_grace = "5m"') + SOURCES)
    anthropic_state = tmp_path / "anthropic.json"
    with (
        fake_server("tests.fakes.anthropic_api", anthropic_state) as anthropic_url,
        fake_server("tests.fakes.slack_api", tmp_path / "slack.json") as slack_url,
    ):
        env = galley_run_env(config, db_url, anthropic_url=anthropic_url, slack_url=slack_url)
        processes = Processes(env, Store(db_url), tmp_path)
        yield processes, anthropic_state
        processes.close()


def write_note(folder: Path, text: str) -> None:
    notes = folder / "notes"
    notes.mkdir(exist_ok=True)
    path = notes / "release.md"
    path.write_text(text)
    hour_ago = time.time() - 3600  # inside the 7-day window of any slot the run drafts
    os.utime(path, (hour_ago, hour_ago))


def snapshots(store: Store) -> list[SourceSnapshotRow]:
    with store.read() as session:
        return list(session.exec(select(SourceSnapshotRow)).all())


def lease_lapsed(store: Store, run_id: str) -> bool:
    with store.read() as session:
        draft = session.exec(select(DraftRow).where(col(DraftRow.run_id) == run_id)).one()
        assert draft.lease_until is not None
        return draft.lease_until < database_now(session)


def state_of(store: Store, run_id: str) -> RunState | None:
    with store.read() as session:
        run = session.get(RunRow, run_id)
        return None if run is None else run.state


def test_a_run_killed_after_its_snapshot_is_taken_over_and_drafted_from_it(
    deployment: tuple[Processes, Path], tmp_path: Path
) -> None:
    processes, anthropic_state = deployment
    write_note(tmp_path, "# Release v2.3\nThe login works on Safari again.")

    dead = processes.start(failpoint=Failpoint.AFTER_SNAPSHOT_COMMIT)
    assert dead.wait(timeout=scaled(90)) == FAILPOINT_EXIT_CODE, processes.log_of(1)
    [taken] = snapshots(processes.store)
    assert f":{dead.pid}:" in taken.taken_by
    assert read_requests(anthropic_state) == []  # it died before paying for anything
    write_note(tmp_path, "# Release v9.9\nEverything was rewritten meanwhile.")
    wait_for(lambda: lease_lapsed(processes.store, taken.run_id), 30, "the dead claim's lease")

    replica = processes.start()
    try:
        wait_for(
            lambda: state_of(processes.store, taken.run_id) == RunState.AWAITING_REVIEW,
            90,
            "the killed run drafted by the other process",
        )
    finally:
        stop(replica)

    wall = taken.run_id.partition("@")[2]  # the run's slot, as the prompt template names it
    stamp = f"{wall[11:16]}."
    asked = [
        r["body"]["messages"][0]["content"]
        for r in read_requests(anthropic_state)
        if stamp in r["body"]["messages"][0]["content"]
    ]
    assert len(asked) == 1, asked
    assert "Release v2.3" in asked[0] and "Safari" in asked[0]
    assert "v9.9" not in asked[0] and "rewritten" not in asked[0]
    with processes.store.read() as session:
        items = session.exec(
            select(SnapshotItemRow).where(col(SnapshotItemRow.run_id) == taken.run_id)
        ).all()
        draft = session.exec(select(DraftRow).where(col(DraftRow.run_id) == taken.run_id)).one()
    assert [i.title for i in items] == ["Release v2.3"]
    assert draft.state == DraftState.READY
