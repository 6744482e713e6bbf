"""The Bluesky publisher against the fake PDS over real HTTP, driven by the real `atproto`
client: one record per effect key, looked up by its key, faults classified.

Each test checks what the publisher raised or returned and what the fake received.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from core.errors import (
    EffectNotSent,
    EffectOutcomeUnknown,
    LookupUnavailable,
    MissingExtra,
    MissingSecret,
)
from core.identity import bluesky_record_key
from core.ports import PostQuery, Publication, Publisher
from core.publishing.platforms.bluesky import BlueskyPublisher
from core.setup.publish_targets import BlueskyTarget
from tests.fakes import social
from tests.fakes.bluesky import HANDLE, PASSWORD, FakeBluesky, did_of, rate_limited
from tests.fakes.server import closed_port
from tests.harness.processes import fake_server
from tests.harness.slow_marks import starts_a_server

KEY = "bluesky|weekly-update@2026-11-23T09:00|v1|publish:bluesky:acme.bsky.social"
TEXT = "Our week, in brief: https://example.com/week and more."
ENV = {"GALLEY_BLUESKY_PASSWORD": PASSWORD}
DID = did_of(HANDLE)


def publication(key: str = KEY, text: str = TEXT) -> Publication:
    return Publication(
        effect_key=key,
        draft_key=key.rsplit("|", 1)[0],
        recipe="weekly-update",
        platform="bluesky",
        slot_at=datetime(2026, 11, 23, 9, 0, tzinfo=UTC),
        text=text,
        approver="U0EDITOR",
        approved_at=datetime(2026, 11, 23, 8, 30, tzinfo=UTC),
    )


def query(key: str = KEY, text: str = TEXT) -> PostQuery:
    return PostQuery(key, text, datetime(2026, 11, 23, 8, 30, tzinfo=UTC))


def publisher(
    url: str, *, seconds: float = 5.0, environ: dict[str, str] | None = None
) -> BlueskyPublisher:
    target = BlueskyTarget(to="bluesky", handle=HANDLE, service=url)
    return BlueskyPublisher(target, timedelta(seconds=seconds), ENV if environ is None else environ)


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeBluesky]:
    with FakeBluesky() as server:
        yield server


def creates(fake: FakeBluesky) -> int:
    return len(fake.requests_to("com.atproto.repo.createRecord"))


def test_publish_creates_one_record_under_the_key_derived_from_the_effect_key(
    fake: FakeBluesky,
) -> None:
    pub: Publisher = publisher(fake.url)
    assert pub.target == "bluesky:acme.bsky.social"
    rkey = bluesky_record_key(KEY)
    uri = pub.publish(publication())
    assert uri == f"at://{DID}/app.bsky.feed.post/{rkey}"
    [post] = fake.posts_of(DID)
    assert post["rkey"] == rkey and post["text"] == TEXT
    assert pub.link(uri) == f"https://bsky.app/profile/{HANDLE}/post/{rkey}"
    assert pub.link("pub_1") is None


def test_lookup_is_get_record_for_that_key(fake: FakeBluesky) -> None:
    pub = publisher(fake.url)
    assert pub.lookup(query()) is None
    uri = pub.publish(publication())
    assert pub.lookup(query()) == uri
    reads = fake.requests_to("com.atproto.repo.getRecord")
    # nothing there: the first record, then a thread's second (its first may be deleted)
    assert len(reads) == 3 and f"rkey={bluesky_record_key(KEY)}" in reads[-1].path


def test_lookup_needs_no_session(fake: FakeBluesky) -> None:
    publisher(fake.url).publish(publication())
    fresh = publisher(fake.url, environ={})  # a restarted process, no password at hand
    assert fresh.lookup(query()) is not None
    assert fake.sessions_created() == 1


@pytest.mark.parametrize(
    "action",
    [social.accept_then_drop(), social.accept_then_hang(10)],
    ids=["accept_then_drop", "accept_then_hang"],
)
def test_a_lost_answer_is_unknown_and_the_lookup_finds_the_one_post(
    fake: FakeBluesky, action: social.Action
) -> None:
    fake.script("create", action)
    pub = publisher(fake.url, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    assert len(fake.posts_of(DID)) == 1
    assert pub.lookup(query()) == fake.posts_of(DID)[0]["uri"]


@pytest.mark.parametrize(
    "action", [social.drop(), social.hang_before(10)], ids=["drop", "hang_before"]
)
def test_no_answer_before_acting_is_unknown_and_the_lookup_says_absent(
    fake: FakeBluesky, action: social.Action
) -> None:
    fake.script("create", action)
    pub = publisher(fake.url, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    assert fake.posts == [] and pub.lookup(query()) is None
    pub.publish(publication())
    assert len(fake.posts_of(DID)) == 1


def test_a_second_create_is_the_bare_500_and_is_unknown_never_a_second_post(
    fake: FakeBluesky,
) -> None:
    pub = publisher(fake.url)
    uri = pub.publish(publication())
    with pytest.raises(EffectOutcomeUnknown, match="500"):
        pub.publish(publication())
    assert creates(fake) == 2 and len(fake.posts_of(DID)) == 1  # no blind retry either
    assert pub.lookup(query()) == uri


def test_a_post_held_from_reads_is_not_doubled_when_created_again(fake: FakeBluesky) -> None:
    fake.script("create", social.hold())
    pub = publisher(fake.url)
    uri = pub.publish(publication())
    assert pub.lookup(query()) is None  # not visible yet: looks absent
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())  # the record key is taken all the same
    assert len(fake.posts_of(DID)) == 1
    fake.release()
    assert pub.lookup(query()) == uri


def test_a_record_under_the_key_with_other_text_cannot_be_taken_for_ours(
    fake: FakeBluesky,
) -> None:
    pub = publisher(fake.url)
    pub.publish(publication())
    with pytest.raises(LookupUnavailable, match="different post"):
        pub.lookup(query(text="Something else entirely."))


REFUSALS: dict[str, tuple[Callable[[], social.Action], bool, bool, float | None]] = {
    # id: (the fake's answer, permanent, auth, seconds to wait)
    "429": (lambda: rate_limited(120), False, False, 120.0),
    "503": (lambda: social.status(503, headers={"Retry-After": "7"}), False, False, 7.0),
    "401": (
        lambda: social.status(401, {"error": "InvalidToken", "message": "Bad"}),
        True,
        True,
        None,
    ),
    "403": (lambda: social.status(403, {"error": "Forbidden", "message": "no"}), True, True, None),
    "400": (
        lambda: social.status(400, {"error": "InvalidRequest", "message": "bad facet"}),
        True,
        False,
        None,
    ),
    "413": (lambda: social.status(413), True, False, None),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_refusals_are_not_sent_and_classified(fake: FakeBluesky, case: str) -> None:
    answer, permanent, auth, wait = REFUSALS[case]
    action = answer()
    fake.script("create", action)
    with pytest.raises(EffectNotSent) as caught:
        publisher(fake.url).publish(publication())
    error = caught.value
    assert (error.permanent, error.auth) == (permanent, auth)
    if wait is None:
        assert error.retry_after is None
    else:
        assert error.retry_after is not None and wait - 5 <= error.retry_after <= wait
    if auth:
        assert "GALLEY_BLUESKY_PASSWORD" in str(error)
    if action.body and action.body.get("message"):
        assert action.body["message"] in str(error)  # the platform's own words
    assert fake.posts == []


@pytest.mark.parametrize("code", [500, 502, 504])
def test_a_server_error_after_the_create_left_is_unknown(fake: FakeBluesky, code: int) -> None:
    fake.script("create", social.status(code))
    with pytest.raises(EffectOutcomeUnknown):
        publisher(fake.url).publish(publication())


def test_an_unreachable_pds_is_not_sent_and_retryable() -> None:
    pub = publisher(f"http://127.0.0.1:{closed_port()}", seconds=2)
    with pytest.raises(EffectNotSent) as caught:
        pub.publish(publication())
    assert not caught.value.permanent
    with pytest.raises(LookupUnavailable):
        pub.lookup(query())


def test_lookup_failures_cannot_tell(fake: FakeBluesky) -> None:
    pub = publisher(fake.url, seconds=1)
    pub.publish(publication())
    fake.script("read", social.status(500), social.hang_before(10), social.accept())
    with pytest.raises(LookupUnavailable, match="500"):
        pub.lookup(query())
    with pytest.raises(LookupUnavailable):
        pub.lookup(query())
    assert pub.lookup(query()) is not None


# --- the session ---------------------------------------------------------------------------


def test_three_publishes_make_one_session(fake: FakeBluesky) -> None:
    pub = publisher(fake.url)
    for week in ("2026-11-23", "2026-11-30", "2026-12-07"):
        pub.publish(publication(KEY.replace("2026-11-23", week)))
    assert fake.sessions_created() == 1 and len(fake.posts_of(DID)) == 3


@pytest.mark.slow
def test_a_session_near_expiry_is_refreshed_not_made_again() -> None:
    with FakeBluesky(access_seconds=60) as fake:  # within the client's 15-minute margin
        pub = publisher(fake.url)
        for week in ("2026-11-23", "2026-11-30", "2026-12-07"):
            pub.publish(publication(KEY.replace("2026-11-23", week)))
        assert fake.sessions_created() == 1 and fake.sessions_refreshed() >= 2
        assert len(fake.posts_of(DID)) == 3


def test_a_token_the_server_calls_expired_is_refreshed_and_the_post_goes_once(
    fake: FakeBluesky,
) -> None:
    pub = publisher(fake.url)
    pub.publish(publication())
    fake.expire_sessions()
    second = KEY.replace("2026-11-23", "2026-11-30")
    pub.publish(publication(second))
    assert fake.sessions_created() == 1 and fake.sessions_refreshed() == 1
    assert len(fake.posts_of(DID)) == 2 and creates(fake) == 3  # refused once, then sent


def test_a_dead_refresh_token_signs_in_again_once(fake: FakeBluesky) -> None:
    pub = publisher(fake.url)
    pub.publish(publication())
    fake.expire_sessions()
    fake.script("session", social.status(400, {"error": "ExpiredToken", "message": "gone"}))
    pub.publish(publication(KEY.replace("2026-11-23", "2026-11-30")))
    assert fake.sessions_created() == 2 and len(fake.posts_of(DID)) == 2


def test_a_wrong_app_password_stops_naming_the_variable(fake: FakeBluesky) -> None:
    pub = publisher(fake.url, environ={"GALLEY_BLUESKY_PASSWORD": "wrong"})
    with pytest.raises(EffectNotSent, match="GALLEY_BLUESKY_PASSWORD") as caught:
        pub.publish(publication())
    assert caught.value.auth and caught.value.permanent
    assert creates(fake) == 0


def test_a_rate_limited_sign_in_waits_and_sends_nothing(fake: FakeBluesky) -> None:
    fake.script("session", rate_limited(300))
    pub = publisher(fake.url)
    with pytest.raises(EffectNotSent) as caught:
        pub.publish(publication())
    assert not caught.value.permanent and (caught.value.retry_after or 0) > 290
    assert creates(fake) == 0
    pub.publish(publication())
    assert fake.sessions_created() == 2 and len(fake.posts_of(DID)) == 1


@pytest.mark.slow
def test_the_pds_own_session_limit_is_a_rate_limit() -> None:
    with FakeBluesky(session_limit=1) as fake:
        publisher(fake.url).publish(publication())
        with pytest.raises(EffectNotSent) as caught:  # a new process signing in again
            publisher(fake.url).publish(publication(KEY.replace("v1", "v2")))
        assert caught.value.retry_after is not None


def test_a_missing_password_names_the_variable_and_sends_nothing(fake: FakeBluesky) -> None:
    with pytest.raises(MissingSecret, match="GALLEY_BLUESKY_PASSWORD") as caught:
        publisher(fake.url, environ={}).publish(publication())
    assert caught.value.auth and fake.requests == []


def test_a_missing_extra_is_one_clear_line(
    fake: FakeBluesky, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "atproto_client", None)  # as if not installed
    with pytest.raises(MissingExtra, match=r"requirements\.lock") as caught:
        publisher(fake.url).publish(publication())
    assert "galley[" not in str(caught.value) and "atproto client" in str(caught.value)


# --- the text ------------------------------------------------------------------------------


def test_model_text_never_becomes_a_mention_only_links_are_facets(fake: FakeBluesky) -> None:
    text = "Thanks @bob.bsky.social and @alice.test! More: https://example.com/a_(b)."
    publisher(fake.url).publish(publication(text=text))
    [post] = fake.posts_of(DID)
    assert post["mentions"] == [] and post["text"] == text
    [facet] = post["record"]["facets"]
    assert facet["features"] == [
        {"$type": "app.bsky.richtext.facet#link", "uri": "https://example.com/a_(b)"}
    ]
    start, end = facet["index"]["byteStart"], facet["index"]["byteEnd"]
    assert text.encode()[start:end] == b"https://example.com/a_(b)"


def test_fit_counts_graphemes_against_300() -> None:
    pub = publisher("http://127.0.0.1:9")
    family = "👨\u200d👩\u200d👧"  # one grapheme, five code points
    fit = pub.fit(family * 300)
    assert (fit.label, fit.count, fit.limit, fit.fits) == ("Bluesky", 300, 300, True)
    assert pub.fit("e\u0301" * 301).count == 301 and not pub.fit("e\u0301" * 301).fits


def test_a_draft_over_the_limit_is_refused_before_anything_is_sent(fake: FakeBluesky) -> None:
    with pytest.raises(EffectNotSent, match="300 graphemes") as caught:
        publisher(fake.url).publish(publication(text="x" * 301))
    assert caught.value.permanent and fake.requests == []


# --- the fake as a process -----------------------------------------------------------------


@pytest.mark.slow
def test_the_subprocess_fake_obeys_its_state_file_and_keeps_posts_across_a_restart(
    tmp_path: Path,
) -> None:
    state = tmp_path / "bluesky.json"
    social.write_state(state, scripts={"create": [social.accept_then_drop()]})
    with fake_server("tests.fakes.bluesky", state) as url, pytest.raises(EffectOutcomeUnknown):
        publisher(url).publish(publication())
    assert len(social.read_posts(state)) == 1
    with fake_server("tests.fakes.bluesky", state) as url:
        assert publisher(url).lookup(query()) == social.read_posts(state)[0]["uri"]
        with pytest.raises(EffectOutcomeUnknown):
            publisher(url).publish(publication())
    assert len(social.read_posts(state)) == 1
    paths = [r["path"] for r in social.read_requests(state)]
    assert sum("createRecord" in p for p in paths) == 2


def test_the_fake_answers_as_the_reference_pds_does(fake: FakeBluesky) -> None:
    """What `@atproto/pds` 0.5.35, run from npm, answers: the fake must not
    be kinder than the server Galley meets."""
    xrpc = f"{fake.url}/xrpc/"
    record = {"repo": HANDLE, "collection": "app.bsky.feed.post", "record": {"text": "x"}}
    no_token = httpx.post(xrpc + "com.atproto.repo.createRecord", json=record)
    assert (no_token.status_code, no_token.json()["error"]) == (401, "AuthMissing")

    session = httpx.post(
        xrpc + "com.atproto.server.createSession",
        json={"identifier": HANDLE, "password": PASSWORD},
    ).json()
    assert "didDoc" not in session  # only when asked for
    header = json.loads(base64.urlsafe_b64decode(session["accessJwt"].split(".")[0] + "=="))
    assert header["alg"] == "HS256"
    signed = {"Authorization": f"Bearer {session['accessJwt']}"}
    too_long = {**record, "record": {"text": "a" * 301, "createdAt": "2026-11-23T09:00:00Z"}}
    refused = httpx.post(xrpc + "com.atproto.repo.createRecord", json=too_long, headers=signed)
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "InvalidRequest",
        "message": (
            "Invalid app.bsky.feed.post record: grapheme too big (maximum 300, got 301)"
            " at $.record.text"
        ),
    }
    unknown = httpx.get(
        xrpc + "com.atproto.repo.getRecord",
        params={"repo": "nobody.bsky.social", "collection": "app.bsky.feed.post", "rkey": "x"},
    )
    assert (unknown.status_code, unknown.json()["error"]) == (502, "UpstreamFailure")
