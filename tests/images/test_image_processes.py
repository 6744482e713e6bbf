"""A real `galley run` killed after uploading a post's image and before the post
(`Failpoint.AFTER_IMAGE_UPLOADS`, docs/design.md §32), then started again: one upload,
one post, the post naming the upload's blob or media. Bluesky and Mastodon, each fake its
own process keeping what it received across the bot's crash. Both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import select

from core.failpoints import FAILPOINT_EXIT_CODE, Failpoint
from core.images.library import ImageLibrary
from core.models import DraftRow, EffectRow
from core.policies import EffectStep, ImageSource
from core.ports import SystemClock
from core.post_body import PostBody
from core.review.queue import edit
from core.states import EffectState, RunState
from tests.fakes import linkedin, social
from tests.harness.approvals import approve
from tests.images.pictures import flat
from tests.publishing.test_platform_processes import (
    BLUESKY,
    KEY,
    MASTODON,
    RECIPE,
    SLOT,
    Deployment,
    Platform,
    deploy,
)

pytestmark = pytest.mark.slow

UPLOAD_PATHS = {"bluesky": "/xrpc/com.atproto.repo.uploadBlob", "mastodon": "/api/v2/media"}


@pytest.fixture(params=[pytest.param(p, id=p.name) for p in (BLUESKY, MASTODON)])
def deployment(request: pytest.FixtureRequest, tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    platform: Platform = request.param
    yield from deploy(tmp_path, db_url, platform, linkedin.ORGANIZATION)


def draft_with_image_approved(deployment: Deployment) -> None:
    drafted = deployment.galley("draft", RECIPE, "--slot", SLOT, "--json")
    assert '"drafted"' in drafted.stdout, drafted.stderr
    clock, store, config = SystemClock(), deployment.store, deployment.config
    [target] = [t.target for t in config.recipes[RECIPE].targets]
    taken = ImageLibrary(store, clock).take(
        flat(800, 600), "chart.png", ImageSource.SLACK_FILE, [target], alt="A chart"
    )
    with store.read() as session:
        draft = session.get(DraftRow, KEY)
        text = None if draft is None else draft.text
    body = PostBody.single(text or "").with_images([taken.ref]).to_text()
    edited = edit(
        store, config, clock, draft_key=KEY, revision=1, text=body, user="U0EDITOR", permitted=True
    )
    assert edited.accepted, edited.message
    assert approve(store, config, clock, KEY, revision=2).accepted


def uploads(deployment: Deployment) -> int:
    path = UPLOAD_PATHS[deployment.platform.name]
    return sum(
        1
        for r in social.read_requests(deployment.platform_state)
        if r["method"] == "POST" and r["path"].partition("?")[0] == path
    )


def upload_receipts(deployment: Deployment) -> list[EffectRow]:
    with deployment.store.read() as session:
        return list(session.exec(select(EffectRow).where(EffectRow.step == EffectStep.UPLOAD)))


def test_a_bot_killed_after_the_upload_and_before_the_post_uploads_once_and_posts_once(
    deployment: Deployment,
) -> None:
    draft_with_image_approved(deployment)
    crashed = deployment.start(failpoint=Failpoint.AFTER_IMAGE_UPLOADS.value)
    assert crashed.wait(timeout=60) == FAILPOINT_EXIT_CODE, deployment.log_of(1)
    assert uploads(deployment) == 1 and deployment.posts() == 0
    deployment.finish(deployment.start())
    assert deployment.run_row().state == RunState.SUCCEEDED
    assert uploads(deployment) == 1
    assert deployment.posts() == 1
    [receipt] = upload_receipts(deployment)
    assert receipt.state == EffectState.SUCCEEDED and receipt.tries == 1
    [post] = social.read_posts(deployment.platform_state)
    assert receipt.external_id is not None and receipt.external_id in str(post)
