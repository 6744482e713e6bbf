"""The Mastodon publisher against the fake instance over real HTTP, driven by the real
`Mastodon.py` client: an Idempotency-Key per effect key, a look-up that reads the
account's statuses since the attempt began, faults classified, no mention ever made.

Each test checks what the publisher raised or returned and what the fake received.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from core.errors import (
    EffectNotSent,
    EffectOutcomeUnknown,
    LookupUnavailable,
    MissingExtra,
    MissingSecret,
)
from core.identity import header_key
from core.ports import PostQuery, Publication, Publisher
from core.publishing.platforms.mastodon import MastodonPublisher
from core.setup.publish_targets import MastodonTarget
from tests.fakes import social
from tests.fakes.mastodon import TOKEN, FakeMastodon, rate_limited
from tests.fakes.server import closed_port
from tests.harness.slow_marks import starts_a_server

KEY = "mastodon|weekly-update@2026-11-23T09:00|v1|publish:mastodon:m.test"
TEXT = "Our week, in brief.\n\nRead more: https://example.com/2026/11/23/our-week-in-brief & enjoy."
ENV = {"GALLEY_MASTODON_TOKEN": TOKEN}


def publication(key: str = KEY, text: str = TEXT) -> Publication:
    now = datetime.now(UTC)  # the look-up reads statuses since the attempt: the fake's now
    return Publication(
        effect_key=key,
        draft_key=key.rsplit("|", 1)[0],
        recipe="weekly-update",
        platform="mastodon",
        slot_at=now,
        text=text,
        approver="U0EDITOR",
        approved_at=now,
    )


def query(key: str = KEY, text: str = TEXT, since: datetime | None = None) -> PostQuery:
    return PostQuery(key, text, since or datetime.now(UTC) - timedelta(minutes=1))


def publisher(
    url: str,
    *,
    seconds: float = 5.0,
    environ: dict[str, str] | None = None,
    visibility: str = "public",
) -> MastodonPublisher:
    target = MastodonTarget(to="mastodon", instance=url, visibility=visibility)  # type: ignore[arg-type]
    return MastodonPublisher(
        target, timedelta(seconds=seconds), ENV if environ is None else environ
    )


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeMastodon]:
    with FakeMastodon() as server:
        yield server


def posts_sent(fake: FakeMastodon) -> int:
    return len(fake.requests_to("/api/v1/statuses", "POST"))


def test_publish_posts_once_under_the_effect_key(fake: FakeMastodon) -> None:
    pub: Publisher = publisher(fake.url, visibility="unlisted")
    assert pub.target == f"mastodon:{fake.url.removeprefix('http://')}"
    status_id = pub.publish(publication())
    [status] = fake.statuses_of()
    assert status["id"] == status_id and status["visibility"] == "unlisted"
    [post] = fake.requests_to("/api/v1/statuses", "POST")
    assert post.headers["idempotency-key"] == KEY
    assert post.headers["authorization"] == f"Bearer {TOKEN}"
    assert pub.link(status_id) == f"{fake.url}/@galley/{status_id}"


def test_the_same_key_again_is_the_same_status(fake: FakeMastodon) -> None:
    pub = publisher(fake.url)
    first = pub.publish(publication())
    assert pub.publish(publication()) == first
    assert posts_sent(fake) == 2 and len(fake.statuses_of()) == 1


def test_the_fake_remembers_a_key_only_after_the_status_exists(fake: FakeMastodon) -> None:
    """As Mastodon does: two concurrent requests with one key both post. Galley's receipt,
    not the key, keeps the second one from being sent."""
    fake.script("create", social.slow(0.5), social.slow(0.5))
    pub = publisher(fake.url)
    threads = [threading.Thread(target=pub.publish, args=(publication(),)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(fake.statuses_of()) == 2


def test_a_long_effect_key_travels_as_its_hash(fake: FakeMastodon) -> None:
    key = KEY.replace("weekly-update", "a-rather-long-recipe-name-" * 3)
    publisher(fake.url).publish(publication(key))
    [post] = fake.requests_to("/api/v1/statuses", "POST")
    assert post.headers["idempotency-key"] == header_key(key) != key


def test_lookup_reads_the_account_since_the_attempt_and_matches_the_text(
    fake: FakeMastodon,
) -> None:
    pub = publisher(fake.url)
    assert pub.lookup(query()) is None
    status_id = pub.publish(publication())
    pub.publish(publication(KEY.replace("v1", "v2"), text="Another post."))
    assert pub.lookup(query()) == status_id
    assert pub.lookup(query(text="Never posted.")) is None
    later = datetime.now(UTC) + timedelta(hours=1)
    assert pub.lookup(query(since=later)) is None  # before the attempt began: not ours
    [read, *_] = fake.requests_to("/statuses", "GET")
    assert "since_id=" in read.path and "limit=40" in read.path


def test_lookup_pages_back_through_the_account(fake: FakeMastodon) -> None:
    pub = publisher(fake.url)
    status_id = pub.publish(publication())
    for n in range(45):
        pub.publish(publication(f"{KEY}-{n}", text=f"Filler {n}."))
    assert pub.lookup(query()) == status_id
    assert len(fake.requests_to("/statuses", "GET")) == 2


@pytest.mark.parametrize(
    "action",
    [social.accept_then_drop(), social.accept_then_hang(10)],
    ids=["accept_then_drop", "accept_then_hang"],
)
def test_a_lost_answer_is_unknown_and_the_lookup_finds_the_one_post(
    fake: FakeMastodon, action: social.Action
) -> None:
    fake.script("create", action)
    pub = publisher(fake.url, seconds=1)
    started = time.monotonic()
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    assert time.monotonic() - started < 5  # request_timeout is the call_timeout, not 300 s
    [status] = fake.statuses_of()
    assert pub.lookup(query()) == status["id"]


@pytest.mark.parametrize(
    "action", [social.drop(), social.hang_before(10)], ids=["drop", "hang_before"]
)
def test_no_answer_before_acting_is_unknown_and_the_lookup_says_absent(
    fake: FakeMastodon, action: social.Action
) -> None:
    fake.script("create", action)
    pub = publisher(fake.url, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    assert fake.posts == [] and pub.lookup(query()) is None


def test_a_post_held_from_reads_is_not_doubled_when_sent_again(fake: FakeMastodon) -> None:
    fake.script("create", social.hold())
    pub = publisher(fake.url)
    status_id = pub.publish(publication())
    assert pub.lookup(query()) is None  # not visible yet: looks absent
    assert pub.publish(publication()) == status_id  # the key is remembered by now
    assert len(fake.statuses_of()) == 1
    fake.release()
    assert pub.lookup(query()) == status_id


REFUSALS: dict[str, tuple[Callable[[], social.Action], bool, bool, float | None]] = {
    # id: (the fake's answer, permanent, auth, seconds to wait)
    "429": (lambda: rate_limited(120), False, False, 120.0),
    "503": (lambda: social.status(503, headers={"Retry-After": "7"}), False, False, 7.0),
    "401": (lambda: social.status(401, {"error": "The access token is invalid"}), True, True, None),
    "403": (
        lambda: social.status(403, {"error": "This action is outside the authorized scopes"}),
        True,
        True,
        None,
    ),
    "422": (
        lambda: social.status(422, {"error": "Validation failed: Text can't be blank"}),
        True,
        False,
        None,
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_refusals_are_not_sent_and_classified(fake: FakeMastodon, case: str) -> None:
    answer, permanent, auth, wait = REFUSALS[case]
    action = answer()
    fake.script("create", action)
    started = time.monotonic()
    with pytest.raises(EffectNotSent) as caught:
        publisher(fake.url).publish(publication())
    assert time.monotonic() - started < 3  # a 429 is not slept on and re-sent
    error = caught.value
    assert (error.permanent, error.auth) == (permanent, auth)
    if wait is None:
        assert error.retry_after is None
    else:
        assert error.retry_after is not None and wait - 5 <= error.retry_after <= wait
    if auth:
        assert "GALLEY_MASTODON_TOKEN" in str(error)
    if action.body:
        assert action.body["error"] in str(error)  # the platform's own words
    assert posts_sent(fake) == 1 and fake.posts == []


@pytest.mark.parametrize("code", [500, 502, 504])
def test_a_server_error_is_unknown(fake: FakeMastodon, code: int) -> None:
    fake.script("create", social.status(code))
    with pytest.raises(EffectOutcomeUnknown, match=str(code)):
        publisher(fake.url).publish(publication())


def test_an_unreachable_instance_is_not_sent_and_retryable() -> None:
    pub = publisher(f"http://127.0.0.1:{closed_port()}", seconds=2)
    with pytest.raises(EffectNotSent) as caught:
        pub.publish(publication())
    assert not caught.value.permanent
    with pytest.raises(LookupUnavailable):
        pub.lookup(query())


def test_lookup_failures_cannot_tell(fake: FakeMastodon) -> None:
    pub = publisher(fake.url, seconds=1)
    pub.publish(publication())
    fake.script("read", social.status(500), social.hang_before(10))
    with pytest.raises(LookupUnavailable, match="500"):
        pub.lookup(query())
    with pytest.raises(LookupUnavailable):
        pub.lookup(query())
    assert pub.lookup(query()) is not None


def test_a_missing_token_names_the_variable_and_sends_nothing(fake: FakeMastodon) -> None:
    pub = publisher(fake.url, environ={})
    with pytest.raises(MissingSecret, match="GALLEY_MASTODON_TOKEN") as caught:
        pub.publish(publication())
    assert caught.value.auth and posts_sent(fake) == 0
    with pytest.raises(LookupUnavailable, match="GALLEY_MASTODON_TOKEN"):
        pub.lookup(query())


# --- the text ------------------------------------------------------------------------------


def test_model_text_never_mentions_anyone(fake: FakeMastodon) -> None:
    text = "Thanks @bob@mastodon.social and @alice!\n@carol said hi; mail team@acme.test."
    status_id = publisher(fake.url).publish(publication(text=text))
    [status] = fake.statuses_of()
    assert status["mentions"] == []
    sent = fake.requests_to("/api/v1/statuses", "POST")[0].body["status"]
    assert "@bob@" not in sent and "@alice" not in sent and "@carol" not in sent
    assert sent.replace("\u2060", "") == text  # only invisible joiners were added
    assert "team@acme.test" in sent  # an address is not a mention: left alone
    assert publisher(fake.url).lookup(query(text=text)) == status_id


@pytest.mark.slow
def test_fit_uses_the_instance_limit_asked_once_and_counts_links_as_23() -> None:
    with FakeMastodon(max_characters=100) as fake:
        pub = publisher(fake.url)
        link = "https://example.com/" + "x" * 200
        fit = pub.fit("a" * 77 + link)
        assert (fit.count, fit.limit, fit.fits) == (100, 100, True)
        assert not pub.fit("a" * 78 + " " + link).fits
        assert pub.fit("👨\u200d👩\u200d👧").count == 1  # graphemes, as Mastodon counts
        assert fit.label.startswith("Mastodon (")
        assert len(fake.requests_to("/api/v2/instance")) == 1


def test_fit_without_the_instance_assumes_mastodons_default_for_a_while(
    fake: FakeMastodon,
) -> None:
    fake.script("instance", social.status(503))
    pub = publisher(fake.url)
    assert (pub.fit("hello").count, pub.fit("hello").limit) == (5, 500)
    assert len(fake.requests_to("/api/v2/instance")) == 1  # not asked again at once


def test_a_missing_extra_is_one_clear_line(
    fake: FakeMastodon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mastodon", None)  # as if not installed
    with pytest.raises(MissingExtra, match=r"requirements\.lock") as caught:
        publisher(fake.url).publish(publication())
    assert "galley[" not in str(caught.value) and "Mastodon.py client" in str(caught.value)


@pytest.mark.slow
def test_a_draft_over_the_limit_is_refused_before_it_is_sent() -> None:
    with FakeMastodon(max_characters=10) as fake:
        with pytest.raises(EffectNotSent, match="10 characters") as caught:
            publisher(fake.url).publish(publication(text="x" * 11))
        assert caught.value.permanent and posts_sent(fake) == 0


def test_a_key_seen_before_answers_its_status_before_the_body_is_validated(
    fake: FakeMastodon,
) -> None:
    """PostStatusService looks the key up first: a retry whose body would now fail
    validation (blank, too long) still gets the status the key made, with a 200."""
    import httpx

    status_id = publisher(fake.url).publish(publication())
    headers = {"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": header_key(KEY)}

    answers = [
        httpx.post(f"{fake.url}/api/v1/statuses", data={"status": text}, headers=headers)
        for text in ("", "x" * 600)
    ]

    assert [(a.status_code, a.json()["id"]) for a in answers] == [(200, status_id)] * 2
    assert len(fake.statuses_of()) == 1


def test_a_429_names_its_reset_to_the_microsecond_and_galley_reads_it(
    fake: FakeMastodon,
) -> None:
    """RateLimitHeaders: `(request_time + reset_period_offset).iso8601(6)`."""
    action = rate_limited(120)
    fake.script("create", action)

    with pytest.raises(EffectNotSent) as caught:
        publisher(fake.url).publish(publication())

    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", action.headers["X-RateLimit-Reset"]
    )
    assert caught.value.retry_after is not None and 115 <= caught.value.retry_after <= 120


@pytest.mark.slow
@pytest.mark.parametrize("version", ["4.3.0", "4.2.10"])
def test_counts_are_read_on_a_server_older_than_4_3_one_status_at_a_time(version: str) -> None:
    """Mastodon 4.3 reads 20 statuses per `GET /api/v1/statuses?id[]=`; an older server
    has no such route (404): its counts are read one status at a time from then on,
    a deleted status left out as the batch read leaves it out."""
    with FakeMastodon(version=version) as server:
        pub = publisher(server.url)
        ids = [pub.publish(publication(f"{KEY}:{n}", f"Post {n}.")) for n in range(3)]
        server.set_counts(lambda post: post["id"] == ids[0], likes=4)
        server.delete(lambda post: post["id"] == ids[2])

        for _ in range(2):  # the second pass asks the older server no batch again
            counts = pub.read_counts(ids)
            assert sorted(counts) == sorted(ids[:2])
            assert (counts[ids[0]].likes, counts[ids[1]].likes) == (4, 0)

        batches = server.requests_to("/api/v1/statuses", "GET")
        singles = [r for r in server.requests if re.search(r"/api/v1/statuses/\d+$", r.path)]
        if version == "4.3.0":
            assert (len(batches), len(singles)) == (2, 0)
        else:
            assert (len(batches), len(singles)) == (1, 6)
