"""Images on Bluesky, each uploaded once per draft (docs/design.md §32): the real `atproto`
client against the fake PDS over real HTTP. One uploadBlob per image, its blob kept on
the upload receipt and named by the post's `app.bsky.embed.images` with its alt text; a
retry of the post reuses the receipt; a lost upload answer is sent again under the same
key and one blob is attached; the PDS's size errors are refusals for good. Both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlmodel import select

from core.identity import upload_effect_key
from core.models import EffectRow
from core.policies import EffectStep, ImageSource, PublishOutcome
from core.post_body import ImageRef, PostBody
from core.states import EffectState, RunState
from tests.fakes import social
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.bluesky import HANDLE, PASSWORD, FakeBluesky, did_of
from tests.harness.slow_marks import starts_a_server
from tests.harness.worlds import KEY, RUN, MakeWorld, World
from tests.images.pictures import flat, photo

TARGET = f"bluesky:{HANDLE}"
ENV = {"GALLEY_BLUESKY_PASSWORD": PASSWORD}
TEXT = "A week of shipping."


@pytest.fixture
@starts_a_server
def pds() -> Iterator[FakeBluesky]:
    with FakeBluesky() as server:
        yield server


def world_with_images(
    worlds: MakeWorld,
    db_url: str,
    pds: FakeBluesky,
    fake_anthropic: FakeAnthropic,
    images: list[tuple[bytes, str, str]],
) -> tuple[World, list[ImageRef]]:
    """A draft with `images` (bytes, name, alt) approved through the fit rule."""
    publish = f'publish = {{ to = "bluesky", handle = "{HANDLE}", service = "{pds.url}" }}'
    world = worlds(db_url, publish=publish, environ=ENV)
    fake_anthropic.script(ok(text=TEXT))
    key = world.draft()
    refs = [
        world.core.images.take(data, name, ImageSource.SLACK_FILE, [TARGET], alt=alt).ref
        for data, name, alt in images
    ]
    body = PostBody.single(TEXT).with_images(refs).to_text()
    assert world.galley.edit(key, body, revision=1, user="U0EDITOR").accepted
    answer = world.galley.approve(key, revision=2, user="U0EDITOR")
    assert answer.accepted, answer.message
    return world, refs


def embedded(pds: FakeBluesky) -> list[dict[str, object]]:
    [post] = pds.posts_of(did_of(HANDLE))
    return list(post["record"]["embed"]["images"])


def upload_receipts(world: World) -> list[EffectRow]:
    with world.store.read() as session:
        rows = list(session.exec(select(EffectRow).where(EffectRow.step == EffectStep.UPLOAD)))
        return sorted(rows, key=lambda row: row.key)


def test_each_image_is_uploaded_once_and_the_post_names_its_blob_with_the_alt_text(
    db_url: str, worlds: MakeWorld, pds: FakeBluesky, fake_anthropic: FakeAnthropic
) -> None:
    world, refs = world_with_images(
        worlds,
        db_url,
        pds,
        fake_anthropic,
        [
            (photo(1600, 1200), "launch.jpg", "The team at the launch"),
            (flat(400, 300), "c.png", "A chart"),
        ],
    )
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert pds.uploads() == 2
    images = embedded(pds)
    assert [i["alt"] for i in images] == ["The team at the launch", "A chart"]
    assert images[1]["aspectRatio"] == {
        "$type": "app.bsky.embed.defs#aspectRatio",
        "width": 400,
        "height": 300,
    }
    receipts = upload_receipts(world)
    assert [r.key for r in receipts] == sorted(
        upload_effect_key(KEY, TARGET, r.sha256) for r in refs
    )
    assert {r.state for r in receipts} == {EffectState.SUCCEEDED}
    cids = {str(i["image"]["ref"]["$link"]) for i in images}  # type: ignore[index]
    assert cids == {r.external_id for r in receipts}
    assert world.run_row().state == RunState.SUCCEEDED


def test_a_retry_of_the_post_reuses_the_uploaded_blob_never_uploads_again(
    db_url: str, worlds: MakeWorld, pds: FakeBluesky, fake_anthropic: FakeAnthropic
) -> None:
    world, _ = world_with_images(
        worlds, db_url, pds, fake_anthropic, [(flat(800, 600), "c.png", "A chart")]
    )
    pds.script("create", social.status(503))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    world.clock.advance(timedelta(minutes=1))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert pds.uploads() == 1
    assert len(pds.requests_to("com.atproto.repo.createRecord")) == 2
    assert len(embedded(pds)) == 1


def test_a_lost_upload_answer_is_sent_again_under_the_same_key_and_one_blob_attached(
    db_url: str, worlds: MakeWorld, pds: FakeBluesky, fake_anthropic: FakeAnthropic
) -> None:
    world, [ref] = world_with_images(
        worlds, db_url, pds, fake_anthropic, [(flat(800, 600), "c.png", "A chart")]
    )
    pds.script("upload", social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    assert pds.posts_of(did_of(HANDLE)) == []  # no post without its image
    world.clock.advance(timedelta(minutes=1))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert pds.uploads() == 2  # the same bytes again: the same blob
    [receipt] = upload_receipts(world)
    assert receipt.key == upload_effect_key(KEY, TARGET, ref.sha256) and receipt.tries == 2
    [image] = embedded(pds)
    assert image["image"]["ref"]["$link"] == receipt.external_id  # type: ignore[index]


def test_the_pds_refusing_the_blob_as_too_large_fails_the_run_with_the_reason(
    db_url: str, worlds: MakeWorld, pds: FakeBluesky, fake_anthropic: FakeAnthropic
) -> None:
    world, _ = world_with_images(
        worlds, db_url, pds, fake_anthropic, [(photo(900, 700), "p.jpg", "A photo")]
    )
    pds.upload_limit = 1000  # a PDS configured with a tiny blobUploadLimit: 413
    result = world.service().publish_run(RUN)
    assert result.outcome == PublishOutcome.FAILED
    assert world.run_row().state == RunState.FAILED
    assert pds.posts_of(did_of(HANDLE)) == []
    [receipt] = upload_receipts(world)
    assert receipt.state == EffectState.FAILED and "PayloadTooLarge" in (receipt.detail or "")
