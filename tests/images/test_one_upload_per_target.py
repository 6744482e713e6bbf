"""A 12 MB photo added to a draft publishing to Bluesky and Mastodon (docs/design.md
§32): resized once under both limits, refused until its alt text is written, then
uploaded exactly once to each target and attached to each post, however often the
pass runs. Real clients against both fakes over real HTTP. Both backends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.api.draft_images import DraftImages
from core.policies import ImageSource
from core.states import RunState
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.bluesky import HANDLE, FakeBluesky, did_of
from tests.fakes.mastodon import FakeMastodon
from tests.harness.slow_marks import starts_a_server
from tests.harness.two_platforms import Platforms, world_of
from tests.harness.worlds import KEY, RUN, MakeWorld
from tests.images.pictures import photo


@pytest.fixture
@starts_a_server
def platforms() -> Iterator[Platforms]:
    with FakeBluesky() as bluesky, FakeMastodon() as mastodon:
        yield Platforms(bluesky, mastodon)


def test_a_12_mb_photo_is_resized_needs_alt_text_and_is_uploaded_once_per_target(
    db_url: str, worlds: MakeWorld, platforms: Platforms, fake_anthropic: FakeAnthropic
) -> None:
    world = world_of(worlds, db_url, platforms)
    fake_anthropic.script(ok(text="A week of shipping."))
    world.draft()
    images = DraftImages(world.store, world.config, world.core.images, world.core.desk())
    data = photo(3700, 2800)
    assert len(data) > 11_000_000
    answer, taken = images.add(KEY, data, "launch.jpg", ImageSource.SLACK_FILE, user="U0EDITOR")
    assert answer.accepted and taken is not None
    assert taken.facts.size <= 1_000_000 and "resized from 3700x2800" in taken.changed
    refused = world.galley.approve(KEY, revision=2, user="U0EDITOR")
    assert not refused.accepted and "has no alt text" in refused.message
    described = images.describe(
        KEY, 2, {taken.ref.sha256: "The team at the launch"}, user="U0EDITOR"
    )
    assert described.accepted
    assert world.galley.approve(KEY, revision=3, user="U0EDITOR").accepted
    platforms.mastodon.processing_polls = 1
    for _ in range(3):  # the pass runs again and again: nothing is uploaded twice
        world.service().publish_run(RUN)
    assert world.run_row().state == RunState.SUCCEEDED
    assert platforms.bluesky.uploads() == 1 and platforms.mastodon.uploads() == 1
    [post] = platforms.bluesky.posts_of(did_of(HANDLE))
    assert [i["alt"] for i in post["record"]["embed"]["images"]] == ["The team at the launch"]
    [status] = platforms.mastodon.statuses_of()
    assert [m["description"] for m in status["media_attachments"]] == ["The team at the launch"]
