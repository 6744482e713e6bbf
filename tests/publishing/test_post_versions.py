"""A draft with a version per target (docs/design.md §30): each target publishes
its own version, whole, through the real clients against the fakes. Both backends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.policies import PublishOutcome
from core.post_body import PostBody
from core.publishing.platforms.post_text import linkedin_plain
from tests.fakes.bluesky import HANDLE, PASSWORD, FakeBluesky, did_of
from tests.fakes.linkedin import ORGANIZATION, FakeLinkedIn
from tests.fakes.linkedin import TOKEN as LINKEDIN_TOKEN
from tests.harness.slow_marks import starts_a_server
from tests.harness.threads import approved_thread
from tests.harness.worlds import RUN, MakeWorld

BLUESKY = f"bluesky:{HANDLE}"
DID = did_of(HANDLE)


@pytest.fixture
@starts_a_server
def pds() -> Iterator[FakeBluesky]:
    with FakeBluesky() as server:
        yield server


@pytest.fixture
@starts_a_server
def linkedin() -> Iterator[FakeLinkedIn]:
    with FakeLinkedIn() as server:
        yield server


def test_a_long_linkedin_version_and_a_bluesky_version_are_each_published_intact(
    db_url: str, worlds: MakeWorld, pds: FakeBluesky, linkedin: FakeLinkedIn
) -> None:
    """A body with a 2,000-character LinkedIn version and a 280-grapheme Bluesky version
    (issue 38): each target gets its own text, whole."""
    linkedin_version = ("Our quarter, told at length. " * 80)[:1999] + "."
    bluesky_version = "é" * 270 + " " + "👍🏽" * 9  # 280 graphemes, more code points
    publish = (
        f'publish = [{{ to = "linkedin", author = "{ORGANIZATION}", '
        f'api = "{linkedin.url}/rest/" }}, '
        f'{{ to = "bluesky", handle = "{HANDLE}", service = "{pds.url}" }}]'
    )
    environ = {"GALLEY_BLUESKY_PASSWORD": PASSWORD, "GALLEY_LINKEDIN_TOKEN": LINKEDIN_TOKEN}
    world = worlds(db_url, publish=publish, environ=environ)
    body = PostBody({f"linkedin:{ORGANIZATION}": (linkedin_version,), BLUESKY: (bluesky_version,)})
    approved_thread(world, body)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [posted] = linkedin.posts_of(ORGANIZATION)
    assert linkedin_plain(str(posted["commentary"])) == linkedin_version
    [record] = pds.posts_of(DID)
    assert record["text"] == bluesky_version
    assert len(pds.requests_to("com.atproto.repo.createRecord")) == 1  # a single post as before
