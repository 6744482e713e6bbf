"""Real `galley run` processes publishing a four-part Mastodon thread (docs/design.md §31):
SIGKILLed after part 2 while part 3 is on the wire, then restarted: it resumes at the
first part without proof; and two replicas on PostgreSQL passing over the same thread
while its parts are slowed: one status of each part.

The fakes run as their own processes and persist their statuses, so a killed bot loses
nothing on the platform's side. Counted: the statuses on the fake (their order and what
each replies to), the create requests, the receipts and the run.
"""

from __future__ import annotations

import itertools
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.identity import publish_part_key, target_of_publish_key
from core.models import EffectRow
from core.ports import SystemClock
from core.review.queue import edit
from core.states import EffectState, RunState
from tests.fakes import linkedin, social
from tests.harness.approvals import approve
from tests.harness.processes import wait_for
from tests.harness.threads import PARTS, thread_body
from tests.publishing.test_platform_processes import (
    KEY,
    LIVENESS,
    MASTODON,
    SLOW_CALL,
    Deployment,
    deploy,
)

pytestmark = pytest.mark.slow

SLOWED = 3.0  # a part's create held this long: past the 2 s takeover, within the 6 s call


@pytest.fixture
def mastodon(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    yield from deploy(tmp_path, db_url, MASTODON, linkedin.ORGANIZATION)


@pytest.fixture
def replicas(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    if not db_url.startswith("postgresql"):
        pytest.skip("several replicas share PostgreSQL")
    yield from deploy(tmp_path, db_url, MASTODON, linkedin.ORGANIZATION, SLOW_CALL, **LIVENESS)


def draft_and_approve_thread(deployment: Deployment) -> None:
    """`galley draft`, its text edited into four parts, that revision approved."""
    drafted = deployment.galley("draft", "weekly-update", "--slot", "2026-11-23T09:00", "--json")
    assert '"drafted"' in drafted.stdout, drafted.stderr
    store, config, clock = deployment.store, deployment.config, SystemClock()
    text = thread_body().to_text()
    edited = edit(
        store, config, clock, draft_key=KEY, revision=1, text=text, user="U0EDITOR", permitted=True
    )
    assert edited.accepted, edited
    assert approve(store, config, clock, KEY, revision=2).accepted
    assert deployment.run_row().state == RunState.APPROVED


def statuses(deployment: Deployment) -> list[dict[str, object]]:
    return sorted(social.read_posts(deployment.platform_state), key=lambda s: int(str(s["id"])))


def assert_one_thread_in_order(deployment: Deployment) -> None:
    found = statuses(deployment)
    assert [s["source_text"] for s in found] == list(PARTS)
    assert found[0]["in_reply_to_id"] is None
    for before, status in itertools.pairwise(found):
        assert status["in_reply_to_id"] == before["id"]
    target = target_of_publish_key(deployment.effect_key)
    with deployment.store.read() as session:
        for number, status in enumerate(found, start=1):
            receipt = session.get(EffectRow, publish_part_key(KEY, target, number))
            assert receipt is not None and receipt.state == EffectState.SUCCEEDED
            assert receipt.external_id == status["id"]


def test_a_run_killed_after_part_two_resumes_at_part_three_and_posts_each_part_once(
    mastodon: Deployment,
) -> None:
    draft_and_approve_thread(mastodon)
    # parts 1 and 2 go out; part 3 reaches the fake and hangs there, never created
    mastodon.script(social.accept(), social.accept(), social.hang_before(30))
    first = mastodon.start()
    try:
        wait_for(lambda: mastodon.creates() == 3, 60, "part 3 to reach the fake")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    assert first.returncode == -signal.SIGKILL
    assert len(statuses(mastodon)) == 2
    assert mastodon.run_row().state == RunState.PUBLISHING
    mastodon.finish(mastodon.start())
    assert_one_thread_in_order(mastodon)
    assert mastodon.creates() == 5  # parts 3 and 4 sent again after the crash, once each


def test_two_replicas_on_postgresql_publishing_one_thread_post_one_status_of_each_part(
    replicas: Deployment,
) -> None:
    """Both replicas pass over the approved run every couple of seconds while parts 2 and
    3 are slowed past the takeover window: each part's receipt, kept alive by its holder,
    answers the other replica "in progress", and nothing is sent twice."""
    draft_and_approve_thread(replicas)
    replicas.script(social.accept(), social.slow(SLOWED), social.slow(SLOWED))
    replicas.finish(replicas.start(), replicas.start())
    assert_one_thread_in_order(replicas)
    assert replicas.creates() == 4
