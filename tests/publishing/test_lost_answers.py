"""A lost answer is looked up before anyone is paged (docs/design.md §9, §12): a post to
Mastodon or a LinkedIn organization whose answer never came makes the run `uncertain`
and nobody is told; once the destination's read delay (`lookup_grace`) has passed the
publish pass looks it up: found, the run is settled and no alert is ever posted; a
look-up that cannot tell pages people once. Over the fakes; the alerts the fake Slack
received are counted. Both backends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.identity import publish_effect_key
from core.policies import PublishOutcome
from core.publishing.lost_answers import LOOK_UP_ALLOWANCE
from core.setup.publish_targets import LINKEDIN_READ_DELAY, MASTODON_READ_DELAY
from core.states import EffectState, RunState
from tests.fakes import social
from tests.fakes.linkedin import ORGANIZATION, FakeLinkedIn
from tests.fakes.linkedin import TOKEN as LINKEDIN_TOKEN
from tests.fakes.mastodon import TOKEN, FakeMastodon
from tests.harness.slow_marks import starts_a_server
from tests.harness.worlds import KEY, RUN, MakeWorld, World


@pytest.fixture
@starts_a_server
def mastodon() -> Iterator[FakeMastodon]:
    with FakeMastodon() as server:
        yield server


@pytest.fixture
@starts_a_server
def linkedin() -> Iterator[FakeLinkedIn]:
    with FakeLinkedIn() as server:
        yield server


def mastodon_world(worlds: MakeWorld, db_url: str, fake: FakeMastodon) -> World:
    publish = f'publish = {{ to = "mastodon", instance = "{fake.url}" }}'
    return worlds(db_url, publish=publish, environ={"GALLEY_MASTODON_TOKEN": TOKEN})


def mastodon_target(fake: FakeMastodon) -> str:
    return f"mastodon:{fake.url.removeprefix('http://')}"


def linkedin_world(worlds: MakeWorld, db_url: str, fake: FakeLinkedIn) -> World:
    publish = f'publish = {{ to = "linkedin", author = "{ORGANIZATION}", api = "{fake.api}" }}'
    return worlds(db_url, publish=publish, environ={"GALLEY_LINKEDIN_TOKEN": LINKEDIN_TOKEN})


def passes(world: World) -> None:
    """What the bot's passes do meanwhile: publish what is due, sweep the alerts."""
    world.service().publish_pending()
    world.alerts().sweep()


def test_a_mastodon_post_whose_answer_was_lost_is_found_after_the_read_delay_unpaged(
    db_url: str, worlds: MakeWorld, mastodon: FakeMastodon
) -> None:
    world = mastodon_world(worlds, db_url, mastodon)
    world.approved()
    mastodon.script("create", social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    looked = len(mastodon.requests_to("/statuses", "GET"))
    passes(world)  # within the read delay: not looked up, nobody told
    assert len(mastodon.requests_to("/statuses", "GET")) == looked
    assert world.run_row().state == RunState.UNCERTAIN
    world.clock.advance(MASTODON_READ_DELAY)
    passes(world)
    assert world.run_row().state == RunState.SUCCEEDED
    world.clock.advance(LOOK_UP_ALLOWANCE)
    world.alerts().sweep()
    assert world.alert_messages() == []
    assert len(mastodon.statuses_of()) == 1
    assert len(mastodon.requests_to("/api/v1/statuses", "POST")) == 1


def test_a_linkedin_post_whose_answer_was_lost_is_found_after_the_read_delay_unpaged(
    db_url: str, worlds: MakeWorld, linkedin: FakeLinkedIn
) -> None:
    """Within the read delay the post is not listed yet: a look-up then would find it
    absent and send again, which LinkedIn refuses as a duplicate (the run failed)."""
    world = linkedin_world(worlds, db_url, linkedin)
    world.approved()
    linkedin.script("create", social.hold_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    passes(world)
    assert world.run_row().state == RunState.UNCERTAIN
    linkedin.release()  # LinkedIn lists it now
    world.clock.advance(LINKEDIN_READ_DELAY)
    passes(world)
    assert world.run_row().state == RunState.SUCCEEDED
    world.clock.advance(LOOK_UP_ALLOWANCE)
    world.alerts().sweep()
    assert world.alert_messages() == []
    assert len(linkedin.posts_of(ORGANIZATION)) == 1


def test_a_lost_answer_the_look_up_after_the_read_delay_cannot_tell_pages_once(
    db_url: str, worlds: MakeWorld, mastodon: FakeMastodon
) -> None:
    world = mastodon_world(worlds, db_url, mastodon)
    world.approved()
    mastodon.script("create", social.drop())  # nothing posted, and no answer
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    passes(world)
    assert world.alert_messages() == []
    mastodon.script("read", *[social.status(503)] * 20)  # the listing cannot be read
    world.clock.advance(MASTODON_READ_DELAY)
    passes(world)
    passes(world)
    world.clock.advance(LOOK_UP_ALLOWANCE)
    passes(world)
    [alert] = world.alert_messages()
    assert "cannot tell whether this was published" in alert["blocks"][0]["text"]["text"]
    assert world.run_row().state == RunState.UNCERTAIN
    assert mastodon.statuses_of() == []


def test_a_lost_answer_nobody_looks_up_is_told_by_the_sweep_after_the_allowance(
    db_url: str, worlds: MakeWorld, mastodon: FakeMastodon
) -> None:
    """No publish pass running: the sweep tells people once the pass had its time."""
    world = mastodon_world(worlds, db_url, mastodon)
    world.approved()
    mastodon.script("create", social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    world.clock.advance(MASTODON_READ_DELAY)
    assert world.alerts().sweep() == 0
    world.clock.advance(LOOK_UP_ALLOWANCE)
    assert world.alerts().sweep() == 1
    assert len(world.alert_messages()) == 1


def test_an_orphaned_send_is_not_settled_absent_within_the_read_delay(
    db_url: str, worlds: MakeWorld, mastodon: FakeMastodon
) -> None:
    """Cancelled while its answer was lost and the post not listed yet: the orphan pass
    waits the read delay, then finds the post; it is never recorded as not sent."""
    world = mastodon_world(worlds, db_url, mastodon)
    world.approved()
    mastodon.script("create", social.hold_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    world.resolver().cancel(RUN, actor="U0ADMIN")
    world.service().publish_pending()  # within the read delay: not looked up
    key = publish_effect_key(KEY, mastodon_target(mastodon))
    receipt = world.effect(key)
    assert receipt is not None and receipt.state == EffectState.UNCERTAIN
    mastodon.release()
    world.clock.advance(MASTODON_READ_DELAY)
    world.service().publish_pending()
    receipt = world.effect(key)
    [status] = mastodon.statuses_of()
    assert receipt is not None and receipt.state == EffectState.SUCCEEDED
    assert receipt.external_id == status["id"]
    assert "completed after cancellation" in (world.run_row().reason or "")
