"""An image in a Slack publication (docs/design.md §32): uploaded once per draft as
slack_sdk's files_upload_v2 does it (getUploadURLExternal, the bytes, then
completeUploadExternal with no channel), and shown by the post's image block with its
alt text; a retry of the post reuses the receipt's file. Against the fake Slack over
real HTTP. Both backends.
"""

from __future__ import annotations

from datetime import timedelta

from core.policies import ImageSource, PublishOutcome
from core.post_body import PostBody
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.slack_api import error
from tests.harness.worlds import ANNOUNCE, RUN, MakeWorld, slack_table
from tests.images.pictures import flat


def test_an_image_is_uploaded_once_and_shown_by_the_posts_image_block(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    world = worlds(db_url, publish=slack_table())
    fake_anthropic.script(ok(text="A week of shipping."))
    key = world.draft()
    ref = world.core.images.take(
        flat(900, 600), "chart.png", ImageSource.SLACK_FILE, [f"slack:{ANNOUNCE}"], alt="A chart"
    ).ref
    body = PostBody.single("A week of shipping.").with_images([ref]).to_text()
    assert world.galley.edit(key, body, revision=1, user="U0EDITOR").accepted
    assert world.galley.approve(key, revision=2, user="U0EDITOR").accepted
    world.slack.script("chat.postMessage", error("internal_error", status=503))
    assert world.service().publish_run(RUN).outcome != PublishOutcome.PUBLISHED
    world.clock.advance(timedelta(minutes=5))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [upload] = world.slack.uploads.values()
    assert upload["complete"] and upload["alt_txt"] == "A chart"
    assert len(world.slack.calls("files.getUploadURLExternal")) == 1
    assert len(world.slack.calls("files.completeUploadExternal")) == 1
    [post] = world.slack.messages(ANNOUNCE)
    [image] = [b for b in post["blocks"] if b["type"] == "image"]
    [file_id] = world.slack.uploads
    assert image["slack_file"] == {"id": file_id} and image["alt_text"] == "A chart"
