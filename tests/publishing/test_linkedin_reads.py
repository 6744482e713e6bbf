"""An organization's LinkedIn posts read back over the fake (docs/design.md §28): the post
itself (found, deleted), and its statistics, or a note where the token's scope lacks
them; a 429 is a refusal, never zeros."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from core.errors import ReadRefused
from core.ports import PostCounts, PostFound, PostGone, PostUnknown
from core.publishing.platforms.linkedin import LinkedInOrganizationPublisher
from core.setup.publish_targets import LinkedInTarget
from tests.fakes import social
from tests.fakes.linkedin import ORGANIZATION, FakeLinkedIn, rate_limited
from tests.harness.slow_marks import starts_a_server
from tests.publishing.test_linkedin import ENV, KEY, publication


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeLinkedIn]:
    with FakeLinkedIn() as server:
        yield server


def reader(api: str) -> LinkedInOrganizationPublisher:
    target = LinkedInTarget(to="linkedin", author=ORGANIZATION, api=api, version="202511")
    return LinkedInOrganizationPublisher(target, timedelta(seconds=5), ENV)


def test_a_post_is_found_and_after_its_deletion_gone(fake: FakeLinkedIn) -> None:
    pub = reader(fake.api)
    urn = pub.publish(publication())
    assert pub.read_post(urn, KEY) == PostFound()
    fake.delete(lambda post: post["id"] == urn)
    found = pub.read_post(urn, KEY)
    assert isinstance(found, PostGone) and found.status == 404


def test_a_failing_read_cannot_tell(fake: FakeLinkedIn) -> None:
    pub = reader(fake.api)
    urn = pub.publish(publication())
    fake.script("post", social.status(503))
    assert isinstance(pub.read_post(urn, KEY), PostUnknown)


def test_statistics_give_reactions_comments_shares_and_impressions(fake: FakeLinkedIn) -> None:
    pub = reader(fake.api)
    urn = pub.publish(publication())
    fake.set_counts(lambda post: post["id"] == urn, likes=7, replies=2, reposts=1, impressions=90)
    assert pub.read_counts([urn]) == {
        urn: PostCounts(likes=7, reposts=1, replies=2, quotes=0, impressions=90)
    }


def test_a_token_without_the_statistics_scope_says_so_instead_of_counting(
    fake: FakeLinkedIn,
) -> None:
    pub = reader(fake.api)
    urn = pub.publish(publication())
    fake.statistics_denied = True
    [counts] = pub.read_counts([urn]).values()
    assert counts.impressions is None and counts.note is not None
    assert "rw_organization_admin" in counts.note


def test_a_429_on_statistics_is_a_refusal_with_its_wait(fake: FakeLinkedIn) -> None:
    pub = reader(fake.api)
    urn = pub.publish(publication())
    fake.script("counts", rate_limited(retry_after=30))
    with pytest.raises(ReadRefused) as refused:
        pub.read_counts([urn])
    assert refused.value.retry_after == 30
