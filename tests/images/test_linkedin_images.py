"""An image on a LinkedIn page's post (docs/design.md §32): the Images API's
initializeUpload, then the bytes PUT to the URL it named, once per draft, then the
post's `content.media` naming the image URN with its alt text; a retry of the post
reuses the receipt's URN. Over real HTTP against the fake. Both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlmodel import select

from core.models import EffectRow
from core.policies import EffectStep, ImageSource, PublishOutcome
from core.post_body import PostBody
from core.states import EffectState
from tests.fakes import linkedin, social
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.linkedin import FakeLinkedIn
from tests.harness.slow_marks import starts_a_server
from tests.harness.worlds import RUN, MakeWorld
from tests.images.pictures import flat

TARGET = f"linkedin:{linkedin.ORGANIZATION}"


@pytest.fixture
@starts_a_server
def page() -> Iterator[FakeLinkedIn]:
    with FakeLinkedIn() as server:
        yield server


def test_an_image_is_initialized_put_once_and_named_by_the_post_with_its_alt_text(
    db_url: str, worlds: MakeWorld, page: FakeLinkedIn, fake_anthropic: FakeAnthropic
) -> None:
    publish = (
        f'publish = {{ to = "linkedin", author = "{linkedin.ORGANIZATION}", api = "{page.api}" }}'
    )
    world = worlds(db_url, publish=publish, environ={"GALLEY_LINKEDIN_TOKEN": linkedin.TOKEN})
    fake_anthropic.script(ok(text="A week of shipping."))
    key = world.draft()
    ref = world.core.images.take(
        flat(1200, 627), "card.png", ImageSource.SLACK_FILE, [TARGET], alt="Our new office"
    ).ref
    body = PostBody.single("A week of shipping.").with_images([ref]).to_text()
    assert world.galley.edit(key, body, revision=1, user="U0EDITOR").accepted
    assert world.galley.approve(key, revision=2, user="U0EDITOR").accepted
    page.script("create", social.status(503))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    world.clock.advance(timedelta(minutes=1))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert page.uploads() == 1
    puts = [r for r in page.requests if r.method == "PUT"]
    assert len(puts) == 1 and puts[0].headers["authorization"] == f"Bearer {linkedin.TOKEN}"
    with world.store.read() as session:
        [receipt] = list(session.exec(select(EffectRow).where(EffectRow.step == EffectStep.UPLOAD)))
    assert receipt.state == EffectState.SUCCEEDED
    [post] = page.posts
    assert post["content"] == {"media": {"id": receipt.external_id, "altText": "Our new office"}}
    assert page.images[str(receipt.external_id)]["status"] == "AVAILABLE"
