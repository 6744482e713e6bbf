"""A reviewer drops a 12 MB photo into the review message's thread (docs/design.md §32):
the bot downloads it with its token from the fake Slack, the photo is resized under
every target's limit and added to the draft as its next revision; the review message
shows its name, size and that it has no alt text; Approve is refused until the alt text
is written; Remove takes it off again. Through Bolt's dispatch, signed as Slack signs.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from sqlmodel import select

from bot.image_blocks import ACTION_REMOVE_IMAGE
from core.images.limits import ImageFacts
from core.models import ImageRow
from core.post_body import PostBody
from core.states import DraftState
from tests.fakes.anthropic_api import FakeAnthropic, ok, status
from tests.fakes.slack_api import FakeSlack
from tests.fakes.web import FakeWeb
from tests.harness.slack_harness import (
    APPROVE,
    CHANNEL,
    EDIT,
    KEY,
    SETTLE,
    Harness,
    StartBot,
    eventually,
)
from tests.harness.slack_requests import TEAM, text_input, view_submission
from tests.images.pictures import photo

BLUESKY = (
    'publish = [{ to = "bluesky", handle = "acme.bsky.social", service = "http://127.0.0.1:9" },'
    ' { to = "mastodon", instance = "http://127.0.0.1:9" }]'
)
TEXT = "A week of shipping."


def file_shared(
    h: Harness, thread_ts: str, file: dict[str, Any], user: str = "U0EDITOR"
) -> dict[str, Any]:
    """A `message` event of subtype `file_share` in a thread, as the Events API sends it."""
    now = time.time()
    return {
        "token": "legacy",
        "team_id": TEAM,
        "api_app_id": "A0GALLEY",
        "event": {
            "type": "message",
            "subtype": "file_share",
            "text": "",
            "user": user,
            "channel": CHANNEL,
            "channel_type": "channel",
            "thread_ts": thread_ts,
            "ts": f"{now:.6f}",
            "event_ts": f"{now:.6f}",
            "files": [file],
            "upload": False,
        },
        "type": "event_callback",
        "event_id": f"Ev{int(now * 1000)}",
        "event_time": int(now),
        "authorizations": [
            {"team_id": TEAM, "user_id": "UBOT", "is_bot": True, "is_enterprise_install": False}
        ],
    }


def told_in_thread(h: Harness) -> list[str]:
    return [str(c.params.get("text")) for c in h.calls("chat.postEphemeral")]


def stored_images(h: Harness) -> list[ImageFacts]:
    with h.store.read() as session:
        rows = list(session.exec(select(ImageRow)))
        return [ImageFacts(r.media_type, r.width, r.height, r.size) for r in rows]


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GALLEY_BLUESKY_PASSWORD", "app-pass")
    monkeypatch.setenv("GALLEY_MASTODON_TOKEN", "token")


def test_a_12_mb_photo_dropped_in_the_thread_is_resized_and_needs_alt_text_before_approval(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic, environ: None
) -> None:
    h = start_bot(db_url, slack='approvers = ["U0EDITOR"]', publish=BLUESKY)
    fake_anthropic.script(ok(text=TEXT), status(529))  # no alt text proposed: none to show
    _, message = h.draft_and_post()
    slack: FakeSlack = h.slack
    data = photo(3700, 2800)
    assert len(data) > 11_000_000
    file = slack.add_file("F0PHOTO", "launch.jpg", data, "image/jpeg")
    assert h.sender.event(file_shared(h, message["ts"], file)).status_code == 200  # type: ignore[attr-defined]
    draft = eventually(lambda: h.draft_row() if h.draft_row().revision == 2 else None, "the image")
    [image] = PostBody.parse(draft.text or "").images
    assert image.name == "launch.jpg" and image.alt == ""
    [stored] = stored_images(h)
    assert stored.size <= 1_000_000 and stored.width >= 640  # under Bluesky's blob limit
    shown = eventually(
        lambda: (
            str(h.message_for(KEY)["blocks"])
            if "launch.jpg" in str(h.message_for(KEY)["blocks"])
            else None
        ),
        "the image line",
    )
    assert "no alt text yet" in shown and "Remove" in shown
    assert TEXT in shown and "galley-post/1" not in shown  # the text, never the stored body
    assert h.click(APPROVE, "U0EDITOR").status_code == 200
    [reply] = eventually(
        lambda: [r for r in h.replies("U0EDITOR") if "alt text" in r], "the refusal"
    )
    assert "Image launch.jpg has no alt text" in reply
    assert h.draft_row().state == DraftState.READY and h.draft_row().revision == 2
    assert any("No alt text was proposed for launch.jpg" in t for t in told_in_thread(h))
    downloads = h.calls("files-pri")
    assert len(downloads) == 1 and downloads[0].headers["authorization"] == "Bearer xoxb-test"


def test_remove_takes_the_image_off_as_a_new_revision(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic, environ: None
) -> None:
    h = start_bot(db_url, slack='approvers = ["U0EDITOR"]', publish=BLUESKY)
    fake_anthropic.script(ok(text=TEXT), status(529))  # the alt text is left to people
    _, message = h.draft_and_post()
    file = h.slack.add_file("F0CHART", "chart.jpg", photo(800, 600), "image/jpeg")
    assert h.sender.event(file_shared(h, message["ts"], file)).status_code == 200  # type: ignore[attr-defined]
    eventually(lambda: h.draft_row().revision == 2 or None, "the image")
    blocks = eventually(
        lambda: [b for b in h.message_for(KEY)["blocks"] if "accessory" in b] or None, "Remove"
    )
    [remove] = [b["accessory"]["value"] for b in blocks]
    assert h.click(ACTION_REMOVE_IMAGE, "U0EDITOR", value=remove).status_code == 200
    eventually(lambda: h.draft_row().revision == 3 or None, "the removal")
    assert PostBody.parse(h.draft_row().text or "").images == ()
    assert h.draft_row().text == TEXT  # back to the plain text: the body's common shape


def test_a_file_the_bot_cannot_download_is_not_added_and_the_person_is_told(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic, environ: None
) -> None:
    h = start_bot(db_url, slack='approvers = ["U0EDITOR"]', publish=BLUESKY)
    fake_anthropic.script(ok(text=TEXT))
    _, message = h.draft_and_post()
    file = h.slack.add_file("F0GONE", "gone.jpg", photo(800, 600), "image/jpeg")
    del h.slack.files["F0GONE"]  # deleted before the bot fetched it: Slack's sign-in page
    assert h.sender.event(file_shared(h, message["ts"], file)).status_code == 200  # type: ignore[attr-defined]
    [told] = eventually(
        lambda: [c for c in h.calls("chat.postEphemeral") if "gone.jpg" in str(c.params)] or None,
        "the answer",
    )
    assert "sign-in page" in str(told.params["text"])
    assert h.draft_row().revision == 1 and stored_images(h) == []


def test_edit_shows_the_text_and_a_field_per_image_and_saves_the_alt_text(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic, environ: None
) -> None:
    h = start_bot(db_url, slack='approvers = ["U0EDITOR"]', publish=BLUESKY)
    fake_anthropic.script(ok(text=TEXT), status(529))  # the alt text is left to people
    _, message = h.draft_and_post()
    file = h.slack.add_file("F0CHART", "chart.jpg", photo(800, 600), "image/jpeg")
    assert h.sender.event(file_shared(h, message["ts"], file)).status_code == 200  # type: ignore[attr-defined]
    eventually(lambda: h.draft_row().revision == 2 or None, "the image")
    [image] = PostBody.parse(h.draft_row().text or "").images
    eventually(lambda: "chart.jpg" in str(h.message_for(KEY)["blocks"]) or None, "the line")
    assert h.click(EDIT, "U0EDITOR").status_code == 200
    [opened] = eventually(lambda: h.calls("views.open"), "the edit modal")
    view = opened.params["view"]
    inputs = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    assert inputs["part_0"]["element"]["initial_value"] == TEXT  # the text, never the JSON
    alt_field = f"alt_{image.sha256[:16]}"
    assert inputs[alt_field]["label"]["text"] == "Alt text: chart.jpg"
    submitted = view_submission(
        user="U0EDITOR",
        callback_id="galley_edit_modal",
        private_metadata=view["private_metadata"],
        values={
            "part_0": {"text": text_input(TEXT + " Edited.")},
            alt_field: {"alt": text_input("Sales by week, rising")},
        },
    )
    assert h.sender.interactive(submitted).status_code == 200
    eventually(lambda: h.draft_row().revision == 3 or None, "the edit")
    body = PostBody.parse(h.draft_row().text or "")
    assert body.parts_for("*") == (TEXT + " Edited.",)
    assert [(i.sha256, i.alt) for i in body.images] == [(image.sha256, "Sales by week, rising")]
    eventually(lambda: '"rev":3' in str(h.message_for(KEY)["blocks"]) or None, "revision 3")
    assert h.click(APPROVE, "U0EDITOR").status_code == 200
    eventually(lambda: h.draft_row().state == DraftState.APPROVED or None, "the approval")


def test_a_dropped_image_gets_an_alt_text_from_one_model_call_and_a_redelivery_pays_nothing(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic, environ: None
) -> None:
    h = start_bot(db_url, slack='approvers = ["U0EDITOR"]', publish=BLUESKY)
    fake_anthropic.script(ok(text=TEXT), ok(text="Sales by week, rising"))
    _, message = h.draft_and_post()
    file = h.slack.add_file("F0CHART", "chart.jpg", photo(800, 600), "image/jpeg")
    event = file_shared(h, message["ts"], file)
    event["event"]["text"] = "our weekly sales chart"
    assert h.sender.event(event).status_code == 200  # type: ignore[attr-defined]
    eventually(lambda: h.draft_row().revision == 3 or None, "the proposed alt text")
    [image] = PostBody.parse(h.draft_row().text or "").images
    assert image.alt == "Sales by week, rising"
    asked = str(fake_anthropic.requests[-1].body["messages"])
    assert "chart.jpg" in asked and "our weekly sales chart" in asked and TEXT in asked
    calls = len(fake_anthropic.requests)
    assert h.sender.event(event).status_code == 200  # type: ignore[attr-defined]  # redelivered
    eventually(lambda: len(h.calls("files-pri")) == 2 or None, "the second download")
    eventually(
        lambda: sum("on the draft already" in t for t in told_in_thread(h)) or None, "the answer"
    )
    assert len(fake_anthropic.requests) == calls and h.draft_row().revision == 3
    eventually(
        lambda: "Sales by week, rising" in str(h.message_for(KEY)["blocks"]) or None, "shown"
    )


# --- who may make the bot download, and where its token goes (docs/design.md §34) --------


def test_a_drop_by_someone_who_may_not_edit_is_never_downloaded_nor_stored(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic, environ: None
) -> None:
    h = start_bot(db_url, slack='approvers = ["U0EDITOR"]', publish=BLUESKY)
    fake_anthropic.script(ok(text=TEXT))
    _, message = h.draft_and_post()
    file = h.slack.add_file("F0ANYONE", "anyone.jpg", photo(800, 600), "image/jpeg")
    event = file_shared(h, message["ts"], file, user="U0STRANGER")  # in the channel, no approver
    assert h.sender.event(event).status_code == 200  # type: ignore[attr-defined]
    [told] = eventually(lambda: [t for t in told_in_thread(h) if "anyone.jpg" in t], "the answer")
    assert told == "Image anyone.jpg was not added: you are not one of this Galley's approvers."
    assert h.calls("files-pri") == []  # the file host was never asked
    assert stored_images(h) == [] and h.draft_row().revision == 1


def test_the_bot_token_goes_only_to_slacks_file_host_never_elsewhere_nor_to_a_redirect(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic, environ: None
) -> None:
    h = start_bot(db_url, slack='approvers = ["U0EDITOR"]', publish=BLUESKY)
    fake_anthropic.script(ok(text=TEXT))
    _, message = h.draft_and_post()
    with FakeWeb() as elsewhere:  # another host, recording every request it gets
        there = elsewhere.publish("/a.jpg", photo(800, 600), "image/jpeg")
        named = h.slack.add_file("F0NAMED", "named.jpg", photo(800, 600), "image/jpeg")
        named["url_private_download"] = there.replace("127.0.0.1", "localhost")
        moved = h.slack.add_file("F0MOVED", "moved.jpg", photo(800, 600), "image/jpeg")
        h.slack.file_redirects["F0MOVED"] = there
        for file in (named, moved):
            assert h.sender.event(file_shared(h, message["ts"], file)).status_code == 200  # type: ignore[attr-defined]
        told = eventually(
            lambda: (
                [t for t in told_in_thread(h) if "not downloaded" in t][1:] and told_in_thread(h)
            ),
            "both answers",
        )
        assert elsewhere.requests == []  # neither the token nor anything else reached it
    host = there.split("/")[2].replace("127.0.0.1", "localhost")
    refusal = f"not downloaded: its link is not Slack's file host ({host})"
    assert f"Image named.jpg was not added: {refusal}." in told
    assert "Image moved.jpg was not added: not downloaded: Slack answered with a redirect." in told
    [asked] = h.calls("files-pri")  # Slack's host was asked once, for the moved file
    assert asked.headers["authorization"] == "Bearer xoxb-test"
    assert stored_images(h) == [] and h.draft_row().revision == 1


def test_a_hostile_file_name_and_proposed_alt_text_reach_slack_inert(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic, environ: None
) -> None:
    h = start_bot(db_url, slack='approvers = ["U0EDITOR"]', publish=BLUESKY)
    fake_anthropic.script(ok(text=TEXT), ok(text="@channel <!here> read <@U0BOSS>"))
    _, message = h.draft_and_post()
    name = "<!channel> @here.jpg"
    file = h.slack.add_file("F0LOUD", name, photo(800, 600), "image/jpeg")
    assert h.sender.event(file_shared(h, message["ts"], file)).status_code == 200  # type: ignore[attr-defined]
    eventually(lambda: h.draft_row().revision == 3 or None, "the proposed alt text")
    blocks = eventually(
        lambda: (
            h.message_for(KEY)["blocks"] if "read" in str(h.message_for(KEY)["blocks"]) else None
        ),
        "the image line with its alt text",
    )
    shown = json.dumps(blocks)
    assert "&lt;!channel&gt; @here.jpg" in shown and "@channel &lt;!here&gt; read" in shown
    assert "<!channel" not in shown and "<!here" not in shown and "<@U0BOSS" not in shown
    texts = [t for b in blocks for t in [b.get("text"), *b.get("elements", [])] if t]
    assert all(t["verbatim"] is True for t in texts if t.get("type") == "mrkdwn")
    told = told_in_thread(h)
    assert told and not any("<!channel" in t for t in told)
    assert any("&lt;!channel&gt; @here.jpg" in t for t in told)


def test_the_alt_text_a_reviewer_gave_the_file_in_slack_is_kept_and_no_model_is_asked(
    db_url: str, start_bot: StartBot, fake_anthropic: FakeAnthropic, environ: None
) -> None:
    h = start_bot(db_url, slack='approvers = ["U0EDITOR"]', publish=BLUESKY)
    fake_anthropic.script(ok(text=TEXT), ok(text="A model's guess"))
    _, message = h.draft_and_post()
    drafting_calls = len(fake_anthropic.requests)
    file = h.slack.add_file("F0CHART", "chart.jpg", photo(800, 600), "image/jpeg")
    file["alt_txt"] = "Weekly sales, rising since March"  # Slack's "Add description"
    assert h.sender.event(file_shared(h, message["ts"], file)).status_code == 200  # type: ignore[attr-defined]

    eventually(lambda: h.draft_row().revision >= 2 or None, "the image")
    [image] = PostBody.parse(h.draft_row().text or "").images
    assert image.alt == "Weekly sales, rising since March"
    eventually(lambda: any("chart.jpg added" in t for t in told_in_thread(h)) or None, "told")
    time.sleep(SETTLE)  # a proposal, were one asked for, would have been sent by now
    assert len(fake_anthropic.requests) == drafting_calls  # the model was not asked
    assert h.draft_row().revision == 2  # and no proposal written after the person's words
