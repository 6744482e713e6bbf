"""The webhook publisher against the fake destination over real HTTP, faults included.

Each test checks what the publisher raised or returned and what the fake received.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.errors import EffectNotSent, EffectOutcomeUnknown, LookupUnavailable
from core.ports import PostQuery, Publication, Publisher
from core.publishing.platforms.webhook import WebhookPublisher, WebhookRefused
from tests.fakes.anthropic_api import closed_port
from tests.fakes.webhook import (
    Action,
    FakeWebhook,
    accept,
    accept_then_drop,
    accept_then_hang,
    drop,
    hang_before,
    read_posts,
    read_publications,
    status,
    write_state,
)
from tests.harness.slow_marks import starts_a_server

ROOT = Path(__file__).resolve().parents[2]
KEY = "linkedin|weekly-update@2026-11-23T09:00|v1|publish:webhook"


def publication(key: str = KEY, text: str = "Our week, in brief.") -> Publication:
    return Publication(
        effect_key=key,
        draft_key="linkedin|weekly-update@2026-11-23T09:00|v1",
        recipe="weekly-update",
        platform="linkedin",
        slot_at=datetime(2026, 11, 23, 9, 0, tzinfo=UTC),
        text=text,
        approver="U0EDITOR",
        approved_at=datetime(2026, 11, 23, 8, 30, tzinfo=UTC),
    )


def query(key: str = KEY) -> PostQuery:
    return PostQuery(key, "Our week, in brief.", datetime(2026, 11, 23, 8, 30, tzinfo=UTC))


def publisher(
    fake: FakeWebhook, *, seconds: float = 5.0, status_url: bool = True
) -> WebhookPublisher:
    return WebhookPublisher(
        fake.hook_url, fake.status_url if status_url else None, timedelta(seconds=seconds)
    )


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeWebhook]:
    with FakeWebhook() as server:
        yield server


def test_publish_posts_json_with_idempotency_key_and_returns_the_id(fake: FakeWebhook) -> None:
    pub: Publisher = publisher(fake)
    assert pub.target == "webhook"
    assert pub.publish(publication()) == "pub_1"
    [post] = fake.posts
    assert post.path == "/hook"
    assert post.headers["idempotency-key"] == KEY
    assert post.headers["content-type"] == "application/json"
    assert post.body == {
        "key": KEY,
        "draft_key": "linkedin|weekly-update@2026-11-23T09:00|v1",
        "recipe": "weekly-update",
        "platform": "linkedin",
        "slot": "2026-11-23T09:00:00+00:00",
        "text": "Our week, in brief.",
        "approver": "U0EDITOR",
        "approved_at": "2026-11-23T08:30:00+00:00",
    }
    stored = fake.publications
    assert list(stored) == [KEY] and stored[KEY]["id"] == "pub_1"
    assert stored[KEY]["body"] == post.body


def test_the_same_key_twice_is_one_publication_with_one_id(fake: FakeWebhook) -> None:
    pub = publisher(fake)
    assert pub.publish(publication()) == pub.publish(publication()) == "pub_1"
    assert pub.publish(publication(key="other")) == "pub_2"
    assert len(fake.posts) == 3
    assert list(fake.publications) == [KEY, "other"]


@pytest.mark.parametrize("code", [400, 401, 403, 404, 405, 410, 413, 415, 422])
def test_refusals_are_permanent_and_not_sent(fake: FakeWebhook, code: int) -> None:
    fake.script_post(status(code))
    with pytest.raises(EffectNotSent) as info:
        publisher(fake).publish(publication())
    assert info.value.permanent
    assert f"HTTP {code}" in str(info.value) and f"fake {code}" in str(info.value)
    assert fake.publications == {} and len(fake.posts) == 1


@pytest.mark.parametrize("code", [429, 503])
def test_busy_is_not_sent_and_retryable_with_retry_after(fake: FakeWebhook, code: int) -> None:
    fake.script_post(status(code, {"Retry-After": "7"}), status(code))
    pub = publisher(fake)
    with pytest.raises(WebhookRefused) as info:
        pub.publish(publication())
    assert not info.value.permanent and info.value.status == code
    assert info.value.retry_after == 7.0 and "retry after 7s" in str(info.value)
    with pytest.raises(EffectNotSent) as without:  # no header: no hint, still retryable
        pub.publish(publication())
    assert not without.value.permanent and getattr(without.value, "retry_after", 0) is None
    assert fake.publications == {}


@pytest.mark.parametrize("code", [500, 502, 504])
def test_other_server_errors_are_outcome_unknown(fake: FakeWebhook, code: int) -> None:
    fake.script_post(status(code))
    with pytest.raises(EffectOutcomeUnknown, match=f"HTTP {code}"):
        publisher(fake).publish(publication())


def test_409_under_an_idempotency_key_is_outcome_unknown(fake: FakeWebhook) -> None:
    fake.script_post(status(409))
    with pytest.raises(EffectOutcomeUnknown, match="in progress"):
        publisher(fake).publish(publication())


def test_redirects_are_not_followed(fake: FakeWebhook) -> None:
    fake.script_post(status(308, {"Location": "/elsewhere"}), status(303, {"Location": "/x"}))
    pub = publisher(fake)
    with pytest.raises(EffectNotSent, match="moved to /elsewhere") as info:
        pub.publish(publication())
    assert info.value.permanent
    with pytest.raises(EffectOutcomeUnknown, match="HTTP 303"):
        pub.publish(publication())
    assert len(fake.posts) == 2


def test_accepted_then_hung_is_unknown_and_the_lookup_finds_it(fake: FakeWebhook) -> None:
    fake.script_post(accept_then_hang(10))
    pub = publisher(fake, seconds=1)
    started = time.monotonic()
    with pytest.raises(EffectOutcomeUnknown, match="ReadTimeout"):
        pub.publish(publication())
    assert time.monotonic() - started < 5
    assert fake.publications[KEY]["id"] == "pub_1"
    assert pub.lookup(query()) == "pub_1"


def test_hung_before_acting_is_unknown_and_the_lookup_says_absent(fake: FakeWebhook) -> None:
    fake.script_post(hang_before(10))
    pub = publisher(fake, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    assert fake.publications == {} and len(fake.posts) == 1
    assert pub.lookup(query()) is None


@pytest.mark.parametrize("action", [drop(), accept_then_drop()], ids=["drop", "accept_then_drop"])
def test_a_dropped_connection_is_outcome_unknown(fake: FakeWebhook, action: Action) -> None:
    fake.script_post(action)
    pub = publisher(fake)
    with pytest.raises(EffectOutcomeUnknown):
        pub.publish(publication())
    expected = "pub_1" if action == accept_then_drop() else None
    assert pub.lookup(query()) == expected
    assert pub.publish(publication()) == "pub_1"  # publishing again under the key is safe


def test_connection_refused_is_not_sent_and_retryable() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    pub = WebhookPublisher(url + "/hook", url + "/status/{key}", timedelta(seconds=2))
    with pytest.raises(EffectNotSent, match="ConnectError") as info:
        pub.publish(publication())
    assert not info.value.permanent
    with pytest.raises(LookupUnavailable, match="ConnectError"):
        pub.lookup(query())


def test_lookup_without_a_status_url_cannot_tell(fake: FakeWebhook) -> None:
    with pytest.raises(LookupUnavailable, match="no status_url"):
        publisher(fake, status_url=False).lookup(query())
    assert fake.lookups == []


def test_lookup_failures_cannot_tell(fake: FakeWebhook) -> None:
    publisher(fake).publish(publication())
    fake.script_status(status(500), hang_before(10), accept())
    pub = publisher(fake, seconds=1)
    with pytest.raises(LookupUnavailable, match="HTTP 500"):
        pub.lookup(query())
    with pytest.raises(LookupUnavailable, match="ReadTimeout"):
        pub.lookup(query())
    assert pub.lookup(query()) == "pub_1"


def test_a_key_with_separators_round_trips_through_the_status_url(fake: FakeWebhook) -> None:
    key = "linkedin|weekly/update@2026-11-23T09:00 ~2|v1|publish:webhook?x=1#y"
    pub = publisher(fake)
    assert pub.lookup(query(key)) is None
    assert pub.publish(publication(key=key)) == "pub_1"
    assert pub.lookup(query(key)) == "pub_1"
    raw = fake.lookups[-1]
    assert "|" not in raw and ":" not in raw and "%7C" in raw and "%3A" in raw
    assert raw.count("/") == 2  # the "/" inside the key is quoted too


def test_a_2xx_without_an_id_returns_the_effect_key(fake: FakeWebhook) -> None:
    fake.script_post(status(202))
    assert publisher(fake).publish(publication()) == KEY


def start_subprocess(state: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.webhook", "--port", "0", "--state-file", str(state)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.slow
def test_the_subprocess_fake_obeys_its_state_file_and_keeps_publications_across_a_restart(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.json"
    write_state(state, post_script=[status(503, {"Retry-After": "1"})], status_script=[])
    proc, url = start_subprocess(state)
    try:
        assert url.startswith("http://127.0.0.1:")
        pub = WebhookPublisher(url + "/hook", url + "/status/{key}", timedelta(seconds=2))
        with pytest.raises(EffectNotSent):
            pub.publish(publication())
        assert pub.publish(publication()) == "pub_1"
        write_state(state, status_script=[status(500)])
        with pytest.raises(LookupUnavailable):
            pub.lookup(query())
        posts = read_posts(state)
        assert [p["headers"]["idempotency-key"] for p in posts] == [KEY, KEY]
        assert posts[1]["body"]["text"] == "Our week, in brief." and posts[1]["at"] > 0
        assert read_publications(state)[KEY]["id"] == "pub_1"
        assert json.loads(state.read_text()) == {"post_script": [], "status_script": []}
    finally:
        stop(proc)
    proc, url = start_subprocess(state)  # a restart keeps what was received
    try:
        pub = WebhookPublisher(url + "/hook", url + "/status/{key}", timedelta(seconds=2))
        assert pub.lookup(query()) == "pub_1"
        assert pub.publish(publication()) == "pub_1"
        assert pub.publish(publication(key="next")) == "pub_2"
        assert len(read_posts(state)) == 4 and len(read_publications(state)) == 2
    finally:
        stop(proc)


@pytest.mark.slow
def test_a_held_publication_is_stored_at_once_and_read_only_later() -> None:
    """Reads that lag writes: the key is taken at once, the status read says 404 until
    the hold has passed (the stress test's destination)."""
    with FakeWebhook(hold_visibility=0.4) as fake:
        pub = publisher(fake)
        assert pub.publish(publication()) == "pub_1"
        assert pub.lookup(query()) is None
        assert pub.publish(publication()) == "pub_1" and len(fake.publications) == 1
        deadline = time.monotonic() + 10
        while pub.lookup(query()) is None:
            assert time.monotonic() < deadline, "the held publication never became visible"
            time.sleep(0.05)
        assert fake.visible(KEY) is not None
