"""Alt text proposed by the model for an image added without one (docs/design.md §32):
one paid call per draft and image, recorded as an attempt, never repeated by a
redelivered drop; a person's alt text typed while the call runs is kept; the image's
pixels are sent as an image block only under `describe_images = true`. The real
anthropic client against the fake API over HTTP. Both backends.
"""

from __future__ import annotations

from typing import Any, cast

from sqlmodel import select

from bot import image_drops
from bot.slack_files import SlackFiles
from core.api.draft_images import DraftImages
from core.drafting_policies import AttemptCause
from core.images.library import Taken
from core.models import AttemptRow, DraftRevisionRow
from core.policies import ImageSource
from core.ports import Drafter, DraftRequest, ModelReply
from core.post_body import PostBody
from core.review.alt_text import AltTextProposer
from tests.fakes.anthropic_api import FakeAnthropic, ok, status
from tests.harness.worlds import KEY, MakeWorld, World
from tests.images.pictures import photo

TEXT = "A week of shipping."
CONTEXT = "a file named launch.jpg; the reviewer wrote: the team at the launch"


def drafted_with_image(
    worlds: MakeWorld, db_url: str, fake: FakeAnthropic, **kw: Any
) -> tuple[World, DraftImages, Taken]:
    world = worlds(db_url, **kw)
    fake.script(ok(text=TEXT))
    world.draft()
    images = DraftImages(world.store, world.config, world.core.images, world.core.desk())
    answer, taken = images.add(
        KEY, photo(800, 600), "launch.jpg", ImageSource.SLACK_FILE, user="U0EDITOR"
    )
    assert answer.accepted and taken is not None and world.draft_row().revision == 2
    return world, images, taken


def proposer(world: World, drafter: Drafter | None = None) -> AltTextProposer:
    return AltTextProposer(
        world.store, world.config, world.clock, drafter or world.drafter, world.core.images
    )


def alts(world: World) -> list[str]:
    return [i.alt for i in PostBody.parse(world.draft_row().text or "").images]


def alt_attempts(world: World) -> list[AttemptRow]:
    with world.store.read() as session:
        rows = session.exec(select(AttemptRow).where(AttemptRow.cause == AttemptCause.ALT_TEXT))
        return list(rows)


def image_blocks(fake: FakeAnthropic) -> list[dict[str, Any]]:
    content = fake.requests[-1].body["messages"][0]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "image"]


def test_an_added_image_gets_a_proposed_alt_text_from_one_call_and_a_second_ask_pays_nothing(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    world, _, taken = drafted_with_image(worlds, db_url, fake_anthropic)
    fake_anthropic.script(ok(text="The team cheering at the launch."))
    calls = len(fake_anthropic.requests)
    proposal = proposer(world).propose(KEY, taken.ref, CONTEXT)
    assert proposal.answer is not None and proposal.answer.accepted
    assert alts(world) == ["The team cheering at the launch."]
    assert world.draft_row().revision == 3
    asked = fake_anthropic.requests[-1].body
    assert TEXT in str(asked["messages"]) and "the team at the launch" in str(asked["messages"])
    assert image_blocks(fake_anthropic) == []  # no pixels without describe_images
    again = proposer(world).propose(KEY, taken.ref, CONTEXT)  # a redelivered drop
    assert again.answer is None and len(fake_anthropic.requests) == calls + 1
    [attempt] = alt_attempts(world)
    assert attempt.outcome == "ok" and attempt.output_tokens > 0 and attempt.finished_at
    assert attempt.number < 0  # never one of the draft's own attempt numbers


def test_a_proposed_alt_text_is_the_models_revision_not_a_persons_decision(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    """The decision log holds people's acts only: the model's revision is in the draft's
    history and its revisions (written by `model:<name>`), never an `edit` in `galley
    decisions`, whose table, JSON and CSV are one list."""
    world, _, taken = drafted_with_image(worlds, db_url, fake_anthropic)
    fake_anthropic.script(ok(text="The team cheering at the launch."))

    proposal = proposer(world).propose(KEY, taken.ref, CONTEXT)

    assert proposal.answer is not None and world.draft_row().revision == 3
    logged = world.galley.decisions()
    assert [(d.decision, d.who, d.revision) for d in logged] == [("edit", "U0EDITOR", 2)]
    rows = list(logged.records(logged.field_names()))
    assert [row[logged.field_names().index("who")] for row in rows] == ["U0EDITOR"]
    with world.store.read() as session:
        [written] = session.exec(
            select(DraftRevisionRow).where(DraftRevisionRow.revision == 3)
        ).all()
    assert written.written_by.startswith("model")


def test_a_claimed_proposal_is_not_paid_again_even_when_the_image_still_has_no_alt_text(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    world, _, taken = drafted_with_image(worlds, db_url, fake_anthropic)
    fake_anthropic.script(status(500), ok(text="Never asked"))
    failed = proposer(world).propose(KEY, taken.ref, CONTEXT)
    assert failed.answer is None and "No alt text was proposed for launch.jpg" in failed.told
    assert alts(world) == [""] and world.draft_row().revision == 2  # the fit line still blocks
    calls = len(fake_anthropic.requests)
    assert proposer(world).propose(KEY, taken.ref, CONTEXT).answer is None
    assert len(fake_anthropic.requests) == calls
    [attempt] = alt_attempts(world)
    assert attempt.outcome != "ok" and attempt.http_status == 500


class PersonTypesMeanwhile:
    """The model's call, during which a reviewer writes the image's alt text with Edit."""

    def __init__(self, inner: Drafter, images: DraftImages, sha256: str) -> None:
        self.inner, self.images, self.sha256 = inner, images, sha256

    def draft(self, request: DraftRequest) -> ModelReply:
        typed = self.images.describe(KEY, 2, {self.sha256: "Written by a person"}, user="U0EDITOR")
        assert typed.accepted
        return self.inner.draft(request)


def test_an_alt_text_a_person_typed_before_the_proposal_lands_is_kept(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    world, images, taken = drafted_with_image(worlds, db_url, fake_anthropic)
    fake_anthropic.script(ok(text="The model's words"))
    racing = PersonTypesMeanwhile(world.drafter, images, taken.ref.sha256)
    proposal = proposer(world, racing).propose(KEY, taken.ref, CONTEXT)
    assert proposal.answer is None
    assert alts(world) == ["Written by a person"] and world.draft_row().revision == 3
    [attempt] = alt_attempts(world)
    assert attempt.outcome == "ok"  # paid for, and counted, though not used


def test_describe_images_sends_the_image_as_a_base64_block(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    world, _, taken = drafted_with_image(
        worlds, db_url, fake_anthropic, defaults="describe_images = true"
    )
    assert world.recipe.describe_images
    fake_anthropic.script(ok(text="A chart going up."))
    assert proposer(world).propose(KEY, taken.ref, CONTEXT).answer is not None
    [block] = image_blocks(fake_anthropic)
    assert block["source"]["type"] == "base64"
    assert block["source"]["media_type"] == taken.facts.media_type == "image/jpeg"
    stored = world.core.images.get(taken.ref.sha256)
    assert stored is not None
    import base64

    assert base64.b64decode(block["source"]["data"]) == stored.data
    assert alts(world) == ["A chart going up."]


def test_a_spent_token_budget_proposes_nothing_and_says_why(
    db_url: str, worlds: MakeWorld, fake_anthropic: FakeAnthropic
) -> None:
    world, _, taken = drafted_with_image(
        worlds, db_url, fake_anthropic, defaults="daily_token_budget = 1"
    )
    calls = len(fake_anthropic.requests)
    refused = proposer(world).propose(KEY, taken.ref, CONTEXT)
    assert refused.answer is None and "daily_token_budget is spent" in refused.told
    assert len(fake_anthropic.requests) == calls and alt_attempts(world) == []
    assert alts(world) == [""]


def test_a_drop_without_words_asks_for_alt_text_without_an_empty_reviewer_clause(
    db_url: str,
    worlds: MakeWorld,
    fake_anthropic: FakeAnthropic,
) -> None:
    world = worlds(db_url)
    fake_anthropic.script(ok(text=TEXT))
    world.draft()
    images = DraftImages(world.store, world.config, world.core.images, world.core.desk())
    said: list[str] = []

    class Photos:  # Slack's file host, answering a new image each time
        def __init__(self, width: int) -> None:
            self.width = width

        def download(self, file: dict[str, object]) -> bytes:
            return photo(self.width, 600)

    def dropped(words: str, width: int) -> str:
        fake_anthropic.script(ok(text="The team cheering at the launch."))
        drop = image_drops.Drop(KEY, "U0EDITOR", "C0REVIEW", "1.0", {"name": "launch.jpg"}, words)
        files = cast(SlackFiles, Photos(width))
        image_drops.take_drop(drop, images, files, said.append, proposer(world))
        return str(fake_anthropic.requests[-1].body["messages"])

    asked = dropped("  ", 800)
    assert "a file named launch.jpg" in asked and "the reviewer wrote" not in asked
    assert "the reviewer wrote: the crowd" in dropped("the crowd", 640)
