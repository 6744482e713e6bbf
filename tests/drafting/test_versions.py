"""A version per target and threads, drafted and reviewed (docs/design.md §30): one
structured model call for the whole set, validated (a set missing a target is retried,
never stored), measured per version and per part, edited and approved as one revision,
and each version published intact where it belongs.

In process over real HTTP: the real `anthropic`, `atproto` and LinkedIn clients against
the fakes. Both backends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlmodel import col, select

from bot.blocks import draft_message
from core.drafting_policies import AttemptOutcome
from core.identity import text_hash
from core.models import AttemptRow
from core.policies import PublishOutcome, Refusal
from core.post_body import PostBody
from core.publishing.platforms.post_text import graphemes
from core.review.facts import annotate
from core.review.queue import load_item
from core.states import DraftState, RunState
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.bluesky import HANDLE, PASSWORD, FakeBluesky, did_of
from tests.fakes.linkedin import ORGANIZATION, TOKEN, FakeLinkedIn
from tests.fakes.webhook import accept_then_hang
from tests.harness.slack_harness import eventually
from tests.harness.slow_marks import starts_a_server
from tests.harness.worlds import HANG, RUN, MakeWorld, World

BLUESKY = f"bluesky:{HANDLE}"
LINKEDIN = f"linkedin:{ORGANIZATION}"
ENV = {"GALLEY_BLUESKY_PASSWORD": PASSWORD, "GALLEY_LINKEDIN_TOKEN": TOKEN}
# 2,000 characters for LinkedIn; 280 graphemes for Bluesky, 285 code points (an emoji with
# a skin tone is one grapheme of two), so each text is measured in its own units.
LONG = ("Release 2.1 is out with faster sync and a new export. " * 40)[:2000]
SHORT = ("Release 2.1 is out. " * 14)[:270] + "🎉👍🏽" * 5


@pytest.fixture
@starts_a_server
def sites() -> Iterator[tuple[FakeBluesky, FakeLinkedIn]]:
    with FakeBluesky() as bluesky, FakeLinkedIn() as linkedin:
        yield bluesky, linkedin


def per_target_world(
    worlds: MakeWorld, db_url: str, sites: tuple[FakeBluesky, FakeLinkedIn], defaults: str = ""
) -> World:
    bluesky, linkedin = sites
    publish = (
        f'publish = [{{ to = "bluesky", handle = "{HANDLE}", service = "{bluesky.url}" }},'
        f' {{ to = "linkedin", author = "{ORGANIZATION}", api = "{linkedin.api}" }}]'
    )
    defaults = 'variants = "per_target"\n' + defaults
    return worlds(db_url, publish=publish, defaults=defaults, environ=ENV)


def answer(versions: dict[str, list[str]]) -> str:
    """The fake's tool_use input, scripted as JSON."""
    return json.dumps({"versions": versions})


def attempts(world: World) -> list[str | None]:
    return [row.outcome for row in attempt_rows(world)]


def attempt_rows(world: World) -> list[AttemptRow]:
    with world.store.read() as session:
        return list(
            session.exec(
                select(AttemptRow)
                .where(col(AttemptRow.run_id) == RUN)
                .order_by(col(AttemptRow.number))
            ).all()
        )


def test_each_version_is_drafted_in_one_call_and_published_intact_where_it_belongs(
    db_url: str,
    worlds: MakeWorld,
    sites: tuple[FakeBluesky, FakeLinkedIn],
    fake_anthropic: FakeAnthropic,
) -> None:
    assert (len(LONG), graphemes(SHORT), len(SHORT)) == (2000, 280, 285)
    world = per_target_world(worlds, db_url, sites)
    fake_anthropic.script(ok(text=answer({BLUESKY: [SHORT], LINKEDIN: [LONG]})))
    key = world.draft()
    [request] = [r.body for r in fake_anthropic.requests if r.path == "/v1/messages"]
    assert request["tool_choice"] == {"type": "tool", "name": "submit_post"}
    schema = request["tools"][0]["input_schema"]["properties"]["versions"]
    assert sorted(schema["required"]) == sorted([BLUESKY, LINKEDIN])
    system = json.dumps(request["system"])
    assert "300 graphemes" in system and "3000 characters" in system  # each in its own units
    assert world.draft_row(key).text == PostBody({BLUESKY: (SHORT,), LINKEDIN: (LONG,)}).to_text()

    assert world.galley.approve(key, 1, user="U0EDITOR").accepted  # both fit: no refusal
    world.service().publish_run(RUN)
    bluesky, linkedin = sites
    assert [p["text"] for p in bluesky.posts_of(did_of(HANDLE))] == [SHORT]
    assert [p["commentary"] for p in linkedin.posts_of(ORGANIZATION)] == [LONG]
    assert world.run_row().state == RunState.SUCCEEDED


def test_an_answer_missing_a_target_is_retried_and_never_stored(
    db_url: str,
    worlds: MakeWorld,
    sites: tuple[FakeBluesky, FakeLinkedIn],
    fake_anthropic: FakeAnthropic,
) -> None:
    world = per_target_world(worlds, db_url, sites)
    whole = {BLUESKY: ["Short."], LINKEDIN: ["Long."]}
    fake_anthropic.script(
        ok(text=answer({BLUESKY: ["Short."]})),  # LinkedIn's version missing
        ok(text="not a tool call at all"),  # the fake fills the schema: here, a whole set
    )
    key = world.draft()
    assert attempts(world) == [AttemptOutcome.MALFORMED_ANSWER, AttemptOutcome.OK]
    malformed = attempt_rows(world)[0]
    assert (malformed.input_tokens, malformed.output_tokens) == (12, 34)  # paid: counted
    stored = PostBody.parse(world.draft_row(key).text or "")
    assert set(stored.versions) == set(whole)  # a whole set, never the half one
    assert world.draft_row(key).state == DraftState.READY


def test_an_edit_of_one_version_is_a_new_revision_and_the_old_approval_no_longer_counts(
    db_url: str,
    worlds: MakeWorld,
    sites: tuple[FakeBluesky, FakeLinkedIn],
    fake_anthropic: FakeAnthropic,
) -> None:
    world = per_target_world(worlds, db_url, sites, defaults="approvals_required = 2")
    fake_anthropic.script(ok(text=answer({BLUESKY: ["Short."], LINKEDIN: ["Long."]})))
    key = world.draft()
    assert world.approve(key, 1, user="U0EDITOR").accepted  # 1 of 2 on revision 1
    body = PostBody.parse(world.draft_row(key).text or "")
    edited = body.with_versions({BLUESKY: ["Shorter."], LINKEDIN: ["Long."]}).to_text()
    assert world.galley.edit(key, edited, 1, user="U0EDITOR").accepted
    row = world.draft_row(key)
    assert (row.revision, row.text_hash) == (2, text_hash(edited))
    assert not world.approve(key, 1, user="U0OTHER").accepted  # the old revision is stale
    assert world.approve(key, 2, user="U0EDITOR").accepted  # 1 of 2: revision 1's is gone
    assert world.draft_row(key).state == DraftState.READY


def test_a_thread_shows_its_parts_numbered_and_each_part_is_measured(
    db_url: str,
    worlds: MakeWorld,
    sites: tuple[FakeBluesky, FakeLinkedIn],
    fake_anthropic: FakeAnthropic,
) -> None:
    bluesky, _ = sites
    publish = f'publish = {{ to = "bluesky", handle = "{HANDLE}", service = "{bluesky.url}" }}'
    world = worlds(db_url, publish=publish, defaults="thread = 3", environ=ENV)
    parts = ["First part.", "x" * 320, "Third part."]
    fake_anthropic.script(ok(text=answer({"*": parts})))
    key = world.draft()
    [request] = [r.body for r in fake_anthropic.requests if r.path == "/v1/messages"]
    assert (
        request["tools"][0]["input_schema"]["properties"]["versions"]["properties"]["*"]["maxItems"]
        == 3
    )
    item = load_item(world.store, key)
    assert item is not None
    measured = annotate(world.store, world.config, world.clock.now(), item, world.core.fits)
    assert [(f.label, f.count) for f in measured.fits] == [
        ("Bluesky, part 1/3", 11),
        ("Bluesky, part 2/3", 320),
        ("Bluesky, part 3/3", 11),
    ]
    shown = json.dumps(draft_message(measured)[1], ensure_ascii=False)
    assert all(f"{n}/3" in shown for n in (1, 2, 3)) and "320/300 ✗" in shown
    refused = world.galley.approve(key, 1, user="U0EDITOR")
    assert not refused.accepted and "Bluesky, part 2/3: 320/300" in refused.message
    assert refused.refusal == Refusal.DOES_NOT_FIT


def test_a_redraft_rewrites_the_whole_set_with_the_note_through_the_same_request(
    db_url: str,
    worlds: MakeWorld,
    sites: tuple[FakeBluesky, FakeLinkedIn],
    fake_anthropic: FakeAnthropic,
) -> None:
    world = per_target_world(worlds, db_url, sites)
    fake_anthropic.script(
        ok(text=answer({BLUESKY: ["Short."], LINKEDIN: ["Long."]})),
        ok(text=answer({BLUESKY: ["Shorter."]})),  # a half set: retried, never stored
        ok(text=answer({BLUESKY: ["Short, warmer."], LINKEDIN: ["Long, warmer."]})),
    )
    key = world.draft()
    redrafted = world.galley.redraft(key, "Warmer, please.", 1, user="U0EDITOR")
    assert redrafted.accepted, redrafted.message
    first, _, third = [r.body for r in fake_anthropic.requests if r.path == "/v1/messages"]
    assert third["tools"] == first["tools"]  # the same structured request
    prompt = third["messages"][0]["content"]
    assert f'<part of="{BLUESKY}">\nShort.\n</part>' in prompt and "Warmer, please." in prompt
    row = world.draft_row(key)
    assert row.revision == 2
    assert PostBody.parse(row.text or "") == PostBody(
        {BLUESKY: ("Short, warmer.",), LINKEDIN: ("Long, warmer.",)}
    )
    printed = world.galley.show(key).rendered()
    assert f"--- {BLUESKY} ---\nShort, warmer." in printed
    assert f"--- {LINKEDIN} ---\nLong, warmer." in printed


def test_a_versions_send_whose_run_was_cancelled_is_looked_up_by_the_text_it_was_sent_with(
    db_url: str, worlds: MakeWorld
) -> None:
    """An orphaned send of a set is looked up by its target's own version, the text it
    was sent with (its receipt's payload), never by the stored set."""
    world = worlds(db_url, defaults='variants = "per_target"')
    world.approved()
    world.hook.script_post(accept_then_hang(HANG))
    with ThreadPoolExecutor(1) as pool:
        publishing = pool.submit(world.service().publish_run, RUN)
        eventually(lambda: world.posts() == 1, "the POST to reach the webhook")
        world.resolver().cancel(RUN, actor="U0ADMIN")
        assert publishing.result(timeout=15).outcome == PublishOutcome.UNCERTAIN

    world.service("w2").publish_pending()

    run = world.run_row()
    assert run.reason is not None and "→ pub_1" in run.reason
    assert world.draft_row().state == DraftState.PUBLISHED
    assert world.posts() == 1
    assert PostBody.parse(world.draft_row().text or "").versions.keys() == {"webhook"}
