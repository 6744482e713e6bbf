"""The LinkedIn publisher against the fake Posts API over real HTTP (`httpx`): no key, so
`DUPLICATE_POST` is "already there", organizations are looked up by listing their posts,
members cannot be read back, faults classified, no mention ever made.

Each test checks what the publisher raised or returned and what the fake received.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from core.errors import EffectNotSent, EffectOutcomeUnknown, LookupUnavailable, MissingSecret
from core.ports import PostQuery, Publication, Publisher
from core.publishing.platforms.linkedin import MEMBER_UNREADABLE, LinkedInPublisher
from core.setup.publish_targets import LinkedInTarget
from tests.fakes import social
from tests.fakes.linkedin import (
    ORGANIZATION,
    PERSON,
    TOKEN,
    FakeLinkedIn,
    duplicate_of,
    rate_limited,
)
from tests.fakes.server import closed_port
from tests.harness.slow_marks import starts_a_server

KEY = f"linkedin|weekly-update@2026-11-23T09:00|v1|publish:linkedin:{ORGANIZATION}"
TEXT = "Our week, in brief.\n\nRead more: https://example.com/week"
ENV = {"GALLEY_LINKEDIN_TOKEN": TOKEN}


def publication(key: str = KEY, text: str = TEXT) -> Publication:
    now = datetime.now(UTC)
    return Publication(
        effect_key=key,
        draft_key=key.rsplit("|", 1)[0],
        recipe="weekly-update",
        platform="linkedin",
        slot_at=now,
        text=text,
        approver="U0EDITOR",
        approved_at=now,
    )


def query(text: str = TEXT, since: datetime | None = None) -> PostQuery:
    return PostQuery(KEY, text, since or datetime.now(UTC) - timedelta(minutes=1))


def publisher(
    api: str,
    *,
    author: str = ORGANIZATION,
    seconds: float = 5.0,
    environ: dict[str, str] | None = None,
    version: str = "202511",
) -> LinkedInPublisher:
    target = LinkedInTarget(to="linkedin", author=author, api=api, version=version)
    return LinkedInPublisher(
        target, timedelta(seconds=seconds), ENV if environ is None else environ
    )


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeLinkedIn]:
    with FakeLinkedIn() as server:
        yield server


def creates(fake: FakeLinkedIn) -> int:
    return len(fake.requests_to("/rest/posts", "POST"))


def test_publish_posts_once_and_returns_the_urn_from_x_restli_id(fake: FakeLinkedIn) -> None:
    pub: Publisher = publisher(fake.api)
    assert pub.target == f"linkedin:{ORGANIZATION}"
    urn = pub.publish(publication())
    [post] = fake.posts_of(ORGANIZATION)
    assert urn == post["id"] and urn.startswith("urn:li:share:")
    [sent] = fake.requests_to("/rest/posts", "POST")
    assert sent.headers["linkedin-version"] == "202511"
    assert sent.headers["x-restli-protocol-version"] == "2.0.0"
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert sent.body["author"] == ORGANIZATION and sent.body["lifecycleState"] == "PUBLISHED"
    assert pub.link(urn) == f"https://www.linkedin.com/feed/update/{urn}"


def test_a_repeat_refused_as_duplicate_post_is_never_taken_as_ours(fake: FakeLinkedIn) -> None:
    """The post DUPLICATE_POST names may be last week's: an organization's send is refused
    (its look-up ran just before and found nothing of this receipt's), a member's is
    uncertain (nothing can tell) and a person decides."""
    pub = publisher(fake.api)
    urn = pub.publish(publication())
    with pytest.raises(EffectNotSent, match=f"duplicate of {urn}") as refused:
        pub.publish(publication())
    assert refused.value.permanent and not refused.value.auth
    member = publisher(fake.api, author=PERSON)
    member.publish(publication())
    with pytest.raises(EffectOutcomeUnknown, match="a person must check"):
        member.publish(publication())
    assert creates(fake) == 4
    assert len(fake.posts_of(ORGANIZATION)) == 1 and len(fake.posts_of(PERSON)) == 1


def test_a_duplicate_that_names_no_post_is_unknown(fake: FakeLinkedIn) -> None:
    body = duplicate_of("the earlier one")
    fake.script("create", social.status(422, body))
    with pytest.raises(EffectOutcomeUnknown, match="unnamed"):
        publisher(fake.api).publish(publication())


def test_an_organization_is_looked_up_by_its_posts_since_the_attempt(fake: FakeLinkedIn) -> None:
    pub = publisher(fake.api)
    assert pub.lookup(query()) is None
    urn = pub.publish(publication())
    pub.publish(publication(text="Another post."))
    assert pub.lookup(query()) == urn
    assert pub.lookup(query(text="Never posted.")) is None
    [read, *_] = fake.requests_to("/rest/posts", "GET")
    assert "author=urn%3Ali%3Aorganization%3A5515715" in read.path and "q=author" in read.path
    assert read.headers["x-restli-method"] == "FINDER"


def test_the_look_up_pages_back_and_stops_before_the_attempt(fake: FakeLinkedIn) -> None:
    pub = publisher(fake.api)
    urn = pub.publish(publication())
    for n in range(55):
        pub.publish(publication(text=f"Filler {n}."))
    assert pub.lookup(query()) == urn
    assert len(fake.requests_to("/rest/posts", "GET")) == 2
    later = datetime.now(UTC) + timedelta(hours=1)
    assert pub.lookup(query(text="Not there.", since=later)) is None
    assert len(fake.requests_to("/rest/posts", "GET")) == 3  # one page: all older than since


def test_a_post_made_before_the_first_send_or_taken_by_another_receipt_is_not_ours(
    fake: FakeLinkedIn,
) -> None:
    pub = publisher(fake.api)
    urn = pub.publish(publication())
    assert pub.lookup(query()) == urn
    later = datetime.now(UTC) + timedelta(hours=1)
    assert pub.lookup(query(since=later)) is None  # the same text, made before: last week's
    taken = PostQuery(KEY, TEXT, datetime.now(UTC) - timedelta(minutes=1), taken={urn}.__contains__)
    assert pub.lookup(taken) is None  # another receipt's proof already


def test_a_member_cannot_be_read_back_and_the_fake_refuses_it_too(fake: FakeLinkedIn) -> None:
    pub = publisher(fake.api, author=PERSON)
    urn = pub.publish(publication())
    assert fake.posts_of(PERSON)[0]["id"] == urn
    with pytest.raises(LookupUnavailable, match="a person must check") as caught:
        pub.lookup(query())
    assert str(caught.value) == MEMBER_UNREADABLE
    listing = httpx.get(
        f"{fake.api}posts",
        params={"q": "author", "author": PERSON},
        headers={
            "Authorization": f"Bearer {TOKEN}",
            "LinkedIn-Version": "202511",
            "X-Restli-Protocol-Version": "2.0.0",
        },
    )
    assert listing.status_code == 403 and "ACCESS_DENIED" in listing.text


@pytest.mark.parametrize(
    "action",
    [social.accept_then_drop(), social.accept_then_hang(10)],
    ids=["accept_then_drop", "accept_then_hang"],
)
def test_a_lost_answer_is_unknown_then_found_and_never_doubled(
    fake: FakeLinkedIn, action: social.Action
) -> None:
    fake.script("create", action)
    pub = publisher(fake.api, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    [post] = fake.posts_of(ORGANIZATION)
    assert pub.lookup(query()) == post["id"]
    with pytest.raises(EffectNotSent, match="duplicate"):
        pub.publish(publication())  # a blind re-send is refused by LinkedIn itself
    assert len(fake.posts_of(ORGANIZATION)) == 1


@pytest.mark.parametrize(
    "action", [social.drop(), social.hang_before(10)], ids=["drop", "hang_before"]
)
def test_no_answer_before_acting_is_unknown_and_the_lookup_says_absent(
    fake: FakeLinkedIn, action: social.Action
) -> None:
    fake.script("create", action)
    pub = publisher(fake.api, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    assert fake.posts == [] and pub.lookup(query()) is None


def test_a_post_held_from_reads_is_not_doubled_when_sent_again(fake: FakeLinkedIn) -> None:
    fake.script("create", social.hold())
    pub = publisher(fake.api)
    urn = pub.publish(publication())
    assert pub.lookup(query()) is None  # not visible to the listing yet
    with pytest.raises(EffectNotSent, match=f"duplicate of {urn}"):
        pub.publish(publication())  # the duplicate check sees it: refused, never doubled
    assert len(fake.posts_of(ORGANIZATION)) == 1
    fake.release()
    assert pub.lookup(query()) == urn


REFUSALS: dict[str, tuple[Callable[[], social.Action], bool, bool, float | None]] = {
    # id: (the fake's answer, permanent, auth, seconds to wait)
    "429": (lambda: rate_limited(30), False, False, 30.0),
    "429-bare": (lambda: rate_limited(), False, False, None),
    "503": (lambda: social.status(503, headers={"Retry-After": "7"}), False, False, 7.0),
    "401": (
        lambda: social.status(401, {"status": 401, "message": "Invalid access token"}),
        True,
        True,
        None,
    ),
    "403": (
        lambda: social.status(403, {"status": 403, "message": "Not enough permissions"}),
        True,
        True,
        None,
    ),
    "422": (
        lambda: social.status(422, {"status": 422, "message": "ERROR :: /commentary :: bad"}),
        True,
        False,
        None,
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_refusals_are_not_sent_and_classified(fake: FakeLinkedIn, case: str) -> None:
    answer, permanent, auth, wait = REFUSALS[case]
    action = answer()
    fake.script("create", action)
    with pytest.raises(EffectNotSent) as caught:
        publisher(fake.api).publish(publication())
    error = caught.value
    assert (error.permanent, error.auth) == (permanent, auth)
    assert error.retry_after == wait
    if auth:
        assert "GALLEY_LINKEDIN_TOKEN" in str(error) and "w_organization_social" in str(error)
    if action.body:
        assert action.body["message"] in str(error)  # the platform's own words
    assert fake.posts == []


def test_a_retired_version_is_refused_in_linkedins_words(fake: FakeLinkedIn) -> None:
    with pytest.raises(EffectNotSent, match="not active") as caught:
        publisher(fake.api, version="202401").publish(publication())
    assert caught.value.permanent


@pytest.mark.parametrize("code", [500, 502, 504])
def test_a_server_error_is_unknown(fake: FakeLinkedIn, code: int) -> None:
    fake.script("create", social.status(code))
    with pytest.raises(EffectOutcomeUnknown, match=str(code)):
        publisher(fake.api).publish(publication())


def test_an_unreachable_api_is_not_sent_and_retryable() -> None:
    pub = publisher(f"http://127.0.0.1:{closed_port()}/rest/", seconds=2)
    with pytest.raises(EffectNotSent) as caught:
        pub.publish(publication())
    assert not caught.value.permanent
    with pytest.raises(LookupUnavailable):
        pub.lookup(query())


def test_lookup_failures_cannot_tell(fake: FakeLinkedIn) -> None:
    pub = publisher(fake.api, seconds=1)
    pub.publish(publication())
    fake.script("read", social.status(500), social.hang_before(10), rate_limited())
    for _ in range(3):
        with pytest.raises(LookupUnavailable):
            pub.lookup(query())
    assert pub.lookup(query()) is not None


def test_a_missing_token_names_the_variable_and_sends_nothing(fake: FakeLinkedIn) -> None:
    pub = publisher(fake.api, environ={})
    with pytest.raises(MissingSecret, match="GALLEY_LINKEDIN_TOKEN") as caught:
        pub.publish(publication())
    assert caught.value.auth and fake.requests == []
    with pytest.raises(LookupUnavailable, match="GALLEY_LINKEDIN_TOKEN"):
        pub.lookup(query())


# --- the text ------------------------------------------------------------------------------


def test_model_text_is_escaped_little_text_and_never_mentions_anyone(fake: FakeLinkedIn) -> None:
    text = "Thanks @[Ana Lima](urn:li:person:123)! #launch *big* _news_ ~ {x} | <b> \\ (c)"
    pub = publisher(fake.api)
    urn = pub.publish(publication(text=text))
    [post] = fake.posts_of(ORGANIZATION)
    assert post["mentions"] == []
    commentary = post["commentary"]
    assert "@[" not in commentary.replace("\\@\\[", "")
    for reserved in "\\|{}@[]()<>#*_~":
        assert commentary.count("\\" + reserved) >= text.count(reserved), reserved
    assert pub.lookup(query(text=text)) == urn


def test_fit_counts_3000_characters_an_emoji_as_two() -> None:
    pub = publisher("http://127.0.0.1:9/rest/")
    fit = pub.fit("x" * 2998 + "🎉")
    assert (fit.label, fit.count, fit.limit, fit.fits) == ("LinkedIn", 3000, 3000, True)
    assert not pub.fit("x" * 3001).fits


def test_a_draft_over_the_limit_is_refused_before_it_is_sent(fake: FakeLinkedIn) -> None:
    with pytest.raises(EffectNotSent, match="3,000 characters") as caught:
        publisher(fake.api).publish(publication(text="x" * 3001))
    assert caught.value.permanent and fake.requests == []
