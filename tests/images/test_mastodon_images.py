"""Images on Mastodon, each uploaded once per draft (docs/design.md §32): the real
`Mastodon.py` status post and Galley's media calls against the fake instance over real
HTTP. `POST /api/v2/media` answers 202 while processing and is polled (206, then 200)
before the status names it in `media_ids[]`, with the alt text as its description; a
lost upload answer is sent again under the same key and only the receipt's media is
attached (the stray one is never attached). Both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlmodel import select

from core.errors import EffectNotSent
from core.identity import renewed_upload_key, upload_effect_key
from core.models import EffectRow
from core.policies import EffectStep, ImageSource, PublishOutcome
from core.ports import ImageBytes
from core.post_body import ImageRef, PostBody
from core.publishing.platforms.mastodon_images import MastodonMedia
from core.states import EffectState, RunState
from tests.fakes import social
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.mastodon import TOKEN, FakeMastodon
from tests.harness.slow_marks import starts_a_server
from tests.harness.worlds import KEY, RUN, MakeWorld, World
from tests.images.pictures import flat

ENV = {"GALLEY_MASTODON_TOKEN": TOKEN}
TEXT = "A week of shipping."


@pytest.fixture
@starts_a_server
def instance() -> Iterator[FakeMastodon]:
    with FakeMastodon() as server:
        yield server


def target_of(instance: FakeMastodon) -> str:
    return f"mastodon:{instance.url.removeprefix('http://')}"


def approved_with_image(
    worlds: MakeWorld, db_url: str, instance: FakeMastodon, fake_anthropic: FakeAnthropic
) -> tuple[World, ImageRef]:
    world = worlds(
        db_url, publish=f'publish = {{ to = "mastodon", instance = "{instance.url}" }}', environ=ENV
    )
    fake_anthropic.script(ok(text=TEXT))
    key = world.draft()
    ref = world.core.images.take(
        flat(800, 600), "chart.png", ImageSource.SLACK_FILE, [target_of(instance)], alt="A chart"
    ).ref
    body = PostBody.single(TEXT).with_images([ref]).to_text()
    assert world.galley.edit(key, body, revision=1, user="U0EDITOR").accepted
    assert world.galley.approve(key, revision=2, user="U0EDITOR").accepted
    return world, ref


def upload_receipt(world: World) -> EffectRow:
    with world.store.read() as session:
        [row] = list(session.exec(select(EffectRow).where(EffectRow.step == EffectStep.UPLOAD)))
        return row


def test_an_upload_processing_is_polled_then_the_status_names_it_with_its_alt_text(
    db_url: str, worlds: MakeWorld, instance: FakeMastodon, fake_anthropic: FakeAnthropic
) -> None:
    world, ref = approved_with_image(worlds, db_url, instance, fake_anthropic)
    instance.processing_polls = 2  # 202, then 206 twice, then 200
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert instance.uploads() == 1
    polls = [r for r in instance.requests if r.method == "GET" and "/api/v1/media/" in r.path]
    assert len(polls) == 3
    [status] = instance.statuses_of()
    [attached] = status["media_attachments"]
    assert attached["description"] == "A chart" and attached["url"] is not None
    receipt = upload_receipt(world)
    assert receipt.key == upload_effect_key(KEY, target_of(instance), ref.sha256)
    assert receipt.state == EffectState.SUCCEEDED and receipt.external_id == attached["id"]
    assert world.run_row().state == RunState.SUCCEEDED


def test_a_lost_upload_answer_is_sent_again_and_one_media_is_attached(
    db_url: str, worlds: MakeWorld, instance: FakeMastodon, fake_anthropic: FakeAnthropic
) -> None:
    world, _ = approved_with_image(worlds, db_url, instance, fake_anthropic)
    instance.processing_polls = 0
    instance.script("upload", social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    assert instance.statuses_of() == []  # no status without its image
    world.clock.advance(timedelta(minutes=1))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert instance.uploads() == 2 and len(instance.media) == 2  # one stray, never attached
    [status] = instance.statuses_of()
    [attached] = status["media_attachments"]
    receipt = upload_receipt(world)
    assert receipt.tries == 2 and attached["id"] == receipt.external_id
    held = [m for m in instance.media.values() if m["status_id"]]
    assert [m["id"] for m in held] == [receipt.external_id]


def test_a_retry_of_the_status_reuses_the_media_never_uploads_again(
    db_url: str, worlds: MakeWorld, instance: FakeMastodon, fake_anthropic: FakeAnthropic
) -> None:
    world, _ = approved_with_image(worlds, db_url, instance, fake_anthropic)
    instance.processing_polls = 0
    instance.script("create", social.status(503))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    world.clock.advance(timedelta(minutes=1))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert instance.uploads() == 1
    assert len(instance.requests_to("/api/v1/statuses", "POST")) == 2
    [status] = instance.statuses_of()
    assert [m["id"] for m in status["media_attachments"]] == [upload_receipt(world).external_id]


def test_an_upload_mastodon_deleted_unattached_after_a_day_is_made_again_once(
    db_url: str, worlds: MakeWorld, instance: FakeMastodon, fake_anthropic: FakeAnthropic
) -> None:
    """The status held back (503), then tried again a day on: Mastodon destroyed the media
    no status held, so the image is uploaded again, once, under its renewal key; the
    status names the new media."""
    world, ref = approved_with_image(worlds, db_url, instance, fake_anthropic)
    instance.processing_polls = 0
    instance.script("create", social.status(503))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    world.clock.advance(timedelta(hours=21))
    assert instance.clean_up_unattached() == 1
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.NOT_READY
    assert instance.uploads() == 2
    [status] = instance.statuses_of()
    [attached] = status["media_attachments"]
    first = upload_effect_key(KEY, target_of(instance), ref.sha256)
    renewal = world.effect(renewed_upload_key(first, 2))
    assert renewal is not None and renewal.external_id == attached["id"]
    assert world.run_row().state == RunState.SUCCEEDED


def test_an_alt_text_edited_after_the_upload_is_set_before_the_status_names_it(
    instance: FakeMastodon,
) -> None:
    instance.processing_polls = 0
    media = MastodonMedia(instance.url, TOKEN, timedelta(seconds=5))
    image = ImageBytes("a" * 64, "chart.png", "A chart", "image/png", 800, 600, flat(800, 600))
    uploaded = media.upload(image)
    assert instance.media[uploaded.media_id]["description"] == "A chart"
    media.ready([replace(uploaded, alt="Sales by week")])
    assert instance.media[uploaded.media_id]["description"] == "Sales by week"
    media.ready([replace(uploaded, alt="Sales by week")])  # as the instance holds it: no PUT
    media.ready([uploaded])  # back to the first alt text: the instance is asked, not the receipt
    assert instance.media[uploaded.media_id]["description"] == "A chart"
    assert len(instance.requests_to(f"/api/v1/media/{uploaded.media_id}", "PUT")) == 2


def test_a_media_still_processing_holds_the_status_back_without_sending_it(
    instance: FakeMastodon,
) -> None:
    instance.processing_polls = 1000
    media = MastodonMedia(instance.url, TOKEN, timedelta(seconds=1))
    image = ImageBytes("a" * 64, "chart.png", "A chart", "image/png", 800, 600, flat(800, 600))
    uploaded = media.upload(image)
    assert uploaded.detail["processed"] is False
    with pytest.raises(EffectNotSent, match="still processing"):
        media.ready([uploaded])
