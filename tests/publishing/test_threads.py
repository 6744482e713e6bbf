"""Threads, every part once (docs/design.md §31): Bluesky's whole thread in one atomic
`applyWrites` whose reply references are computed here; Mastodon part after part, each
its own key, `Idempotency-Key` and receipt, replying to the part before; Slack's later
parts as replies in the first message's thread.

In process, over real HTTP: the real `atproto`, `Mastodon.py` and `slack_sdk` clients
against the fakes. Tests count records, statuses and messages on the fakes and read the
receipts from the database. Both backends where a database is involved.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from core.errors import EffectNotSent, EffectOutcomeUnknown, KeyPayloadConflict
from core.identity import (
    bluesky_part_record_key,
    header_key,
    publish_effect_key,
    publish_part_key,
    text_hash,
)
from core.policies import Finding, PublishOutcome
from core.ports import PostQuery, Publication
from core.post_body import PostBody
from core.publishing.lookup_proof import publish_payload, publish_spec
from core.publishing.platforms.bluesky import BlueskyPublisher
from core.publishing.post_checks import take_up_publications
from core.publishing.readings import PostReadings
from core.publishing.targets import frozen_text, published_links
from core.setup.publish_targets import MASTODON_READ_DELAY, BlueskyTarget
from core.states import EffectState, RunState
from core.store.leases import lease_now
from tests.fakes import social
from tests.fakes.bluesky import HANDLE, PASSWORD, FakeBluesky, did_of, record_cid
from tests.fakes.mastodon import TOKEN, FakeMastodon
from tests.harness.slow_marks import starts_a_server
from tests.harness.threads import PARTS, approved_thread
from tests.harness.worlds import ANNOUNCE, KEY, RUN, MakeWorld, World

DID = did_of(HANDLE)
BLUESKY = f"bluesky:{HANDLE}"
EFFECT = f"{KEY}|publish:{BLUESKY}"
SINCE = datetime(2026, 11, 23, 8, 30, tzinfo=UTC)


def thread(parts: tuple[str, ...] = PARTS, key: str = EFFECT) -> Publication:
    return Publication(
        effect_key=key,
        draft_key=KEY,
        recipe="weekly-update",
        platform="bluesky",
        slot_at=datetime(2026, 11, 23, 9, 0, tzinfo=UTC),
        text=parts[0],
        approver="U0EDITOR",
        approved_at=SINCE,
        replies=parts[1:],
    )


def bluesky(url: str, seconds: float = 5.0) -> BlueskyPublisher:
    target = BlueskyTarget(to="bluesky", handle=HANDLE, service=url)
    return BlueskyPublisher(
        target, timedelta(seconds=seconds), {"GALLEY_BLUESKY_PASSWORD": PASSWORD}
    )


@pytest.fixture
@starts_a_server
def pds() -> Iterator[FakeBluesky]:
    with FakeBluesky() as server:
        yield server


def in_thread_order(fake: FakeBluesky) -> list[dict[str, object]]:
    by_rkey = {p["rkey"]: p for p in fake.posts_of(DID)}
    return [by_rkey[bluesky_part_record_key(EFFECT, n)] for n in range(1, len(by_rkey) + 1)]


def strong_ref(post: dict[str, object]) -> dict[str, object]:
    return {"uri": post["uri"], "cid": post["cid"], "$type": "com.atproto.repo.strongRef"}


# --- Bluesky: one applyWrites, all parts or none -----------------------------------------


def test_a_four_part_bluesky_thread_is_one_apply_writes_of_four_linked_records(
    pds: FakeBluesky,
) -> None:
    uri = bluesky(pds.url).publish(thread())
    assert len(pds.requests_to("com.atproto.repo.applyWrites")) == 1
    assert pds.requests_to("com.atproto.repo.createRecord") == []
    posts = in_thread_order(pds)
    assert [p["text"] for p in posts] == list(PARTS)
    assert uri == posts[0]["uri"]
    root = posts[0]
    assert "reply" not in root["record"]  # type: ignore[operator]
    for before, post in itertools.pairwise(posts):
        reply = post["record"]["reply"]  # type: ignore[index]
        assert reply["root"] == strong_ref(root)  # the CIDs the PDS gave the records
        assert reply["parent"] == strong_ref(before)
    assert all(p["cid"] == record_cid(p["record"]) for p in posts)  # type: ignore[arg-type]


def test_a_lost_apply_writes_answer_then_a_retry_still_leaves_four_records(
    pds: FakeBluesky,
) -> None:
    pds.script("create", social.accept_then_drop())
    publisher = bluesky(pds.url, seconds=1)
    with pytest.raises(EffectOutcomeUnknown):
        publisher.publish(thread())
    assert len(pds.posts_of(DID)) == 4
    query = PostQuery(EFFECT, PARTS[0], SINCE)
    assert publisher.lookup(query) == in_thread_order(pds)[0]["uri"]  # the first proves all
    with pytest.raises(EffectOutcomeUnknown, match="500"):  # a blind retry names the same records
        publisher.publish(thread())
    assert len(pds.posts_of(DID)) == 4
    assert len(pds.requests_to("com.atproto.repo.applyWrites")) == 2


def test_one_part_over_the_limit_is_refused_before_anything_is_sent(pds: FakeBluesky) -> None:
    too_long = (*PARTS[:2], "x" * 301, PARTS[3])
    with pytest.raises(EffectNotSent, match="300 graphemes") as refused:
        bluesky(pds.url).publish(thread(too_long))
    assert refused.value.permanent
    assert pds.posts == [] and pds.requests_to("com.atproto.repo.applyWrites") == []


def session(pds: FakeBluesky) -> dict[str, str]:
    answer = httpx.post(
        f"{pds.url}/xrpc/com.atproto.server.createSession",
        json={"identifier": HANDLE, "password": PASSWORD},
    ).json()
    return {"Authorization": f"Bearer {answer['accessJwt']}"}


def create(rkey: str, text: str) -> dict[str, object]:
    value = {"$type": "app.bsky.feed.post", "text": text, "createdAt": "2026-11-23T09:00:00Z"}
    return {
        "$type": "com.atproto.repo.applyWrites#create",
        "collection": "app.bsky.feed.post",
        "rkey": rkey,
        "value": value,
    }


@pytest.mark.parametrize("bad", ["too_long", "key_taken"])
def test_the_fake_pds_apply_writes_is_atomic_one_bad_write_writes_nothing(
    pds: FakeBluesky, bad: str
) -> None:
    headers = session(pds)
    url = f"{pds.url}/xrpc/com.atproto.repo.applyWrites"
    keys = [bluesky_part_record_key(EFFECT, n) for n in (1, 2, 3)]
    if bad == "key_taken":
        taken = httpx.post(
            url, headers=headers, json={"repo": DID, "writes": [create(keys[2], "x")]}
        )
        assert taken.status_code == 200
    texts = ["one", "y" * 301 if bad == "too_long" else "two", "three"]
    writes = [create(k, t) for k, t in zip(keys, texts, strict=True)]
    answer = httpx.post(url, headers=headers, json={"repo": DID, "writes": writes})
    if bad == "too_long":  # the lexicon refuses it before any write, naming the write
        assert answer.status_code == 400 and "$.writes[1].value.text" in answer.json()["message"]
        assert pds.posts_of(DID) == []
    else:  # the repository's commit fails on the existing key: a bare 500, nothing written
        assert answer.status_code == 500 and answer.json()["error"] == "InternalServerError"
        assert [p["rkey"] for p in pds.posts_of(DID)] == [keys[2]]


# --- through the publishing service ------------------------------------------------------


def bluesky_world(worlds: MakeWorld, db_url: str, pds: FakeBluesky) -> World:
    publish = f'publish = {{ to = "bluesky", handle = "{HANDLE}", service = "{pds.url}" }}'
    return worlds(db_url, publish=publish, environ={"GALLEY_BLUESKY_PASSWORD": PASSWORD})


def test_an_approved_bluesky_thread_is_published_once_as_one_effect(
    db_url: str, worlds: MakeWorld, pds: FakeBluesky
) -> None:
    world = bluesky_world(worlds, db_url, pds)
    approved_thread(world)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.NOT_READY
    assert [p["text"] for p in in_thread_order(pds)] == list(PARTS)
    [receipt] = world.publish_effects()
    assert receipt.key == EFFECT and receipt.state == EffectState.SUCCEEDED
    assert receipt.external_id == in_thread_order(pds)[0]["uri"]
    assert world.run_row().state == RunState.SUCCEEDED


def test_a_bluesky_thread_whose_answer_was_lost_is_found_and_never_sent_again(
    db_url: str, worlds: MakeWorld, pds: FakeBluesky
) -> None:
    world = bluesky_world(worlds, db_url, pds)
    approved_thread(world)
    pds.script("create", social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert len(pds.posts_of(DID)) == 4
    assert len(pds.requests_to("com.atproto.repo.applyWrites")) == 1  # found, not re-sent


def test_a_bluesky_thread_whose_first_post_was_deleted_while_its_answer_was_lost_ends(
    db_url: str, worlds: MakeWorld, pds: FakeBluesky
) -> None:
    """The thread went out, its answer was lost, and a person deleted its first post: the
    look-up finds the thread by its second record, so it is published (never sent again,
    never uncertain forever), and the reading pass finds the first post gone."""
    world = bluesky_world(worlds, db_url, pds)
    approved_thread(world)
    pds.script("create", social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    first = in_thread_order(pds)[0]
    assert pds.delete(lambda p: p["uri"] == first["uri"]) == 1
    for worker in ("w2", "w3"):
        world.service(worker).publish_run(RUN)
    assert world.run_row().state == RunState.SUCCEEDED
    assert len(pds.requests_to("com.atproto.repo.applyWrites")) == 1  # never sent again
    [receipt] = world.publish_effects()
    assert receipt.external_id == first["uri"]
    readings = PostReadings(
        world.store,
        world.config,
        world.clock,
        "w1",
        world.publishers.publishers_for,
        world.alerts().alert_post_gone,
    )
    readings.read_due()
    world.clock.advance(timedelta(minutes=2))
    assert readings.read_due().gone == 1


def test_a_thread_key_sent_with_another_part_is_a_payload_conflict(
    db_url: str, worlds: MakeWorld, pds: FakeBluesky
) -> None:
    """The target's receipt binds every part: a version whose third part differs under the
    same key is refused by the ledger, though its first part is the same; a single plain
    text keeps the payload receipts had before threads."""
    world = bluesky_world(worlds, db_url, pds)
    ledger = world.ledger()
    other = (*PARTS[:2], "3/4 Something else.", PARTS[3])
    ledger.begin(publish_spec(world.recipe, thread(), RUN))
    with pytest.raises(KeyPayloadConflict):
        ledger.begin(publish_spec(world.recipe, thread(other), RUN))
    single = publish_payload(EFFECT, KEY, (PARTS[0],))
    assert single == {"target": BLUESKY, "draft_key": KEY, "text": text_hash(PARTS[0])}


# --- Mastodon: part after part -----------------------------------------------------------


@pytest.fixture
@starts_a_server
def mastodon() -> Iterator[FakeMastodon]:
    with FakeMastodon() as server:
        yield server


def mastodon_world(worlds: MakeWorld, db_url: str, fake: FakeMastodon) -> World:
    publish = f'publish = {{ to = "mastodon", instance = "{fake.url}" }}'
    return worlds(db_url, publish=publish, environ={"GALLEY_MASTODON_TOKEN": TOKEN})


def mastodon_target(fake: FakeMastodon) -> str:
    return f"mastodon:{fake.url.removeprefix('http://')}"


def assert_a_mastodon_thread(fake: FakeMastodon) -> None:
    statuses = sorted(fake.statuses_of(), key=lambda s: int(s["id"]))
    assert [s["source_text"] for s in statuses] == list(PARTS)
    assert statuses[0]["in_reply_to_id"] is None
    for before, status in itertools.pairwise(statuses):
        assert status["in_reply_to_id"] == before["id"]


def test_a_mastodon_thread_is_four_statuses_each_replying_to_the_one_before(
    db_url: str, worlds: MakeWorld, mastodon: FakeMastodon
) -> None:
    world = mastodon_world(worlds, db_url, mastodon)
    approved_thread(world)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert_a_mastodon_thread(mastodon)
    target = mastodon_target(mastodon)
    keys = [publish_part_key(KEY, target, n) for n in (1, 2, 3, 4)]
    assert keys[0] == publish_effect_key(KEY, target)  # part 1 keeps the target's own key
    sent = [
        r.headers.get("idempotency-key") for r in mastodon.requests_to("/api/v1/statuses", "POST")
    ]
    assert sent == [header_key(k) for k in keys]  # a key of its own per part
    receipts = {r.key: r for r in world.publish_effects()}
    assert set(receipts) == set(keys)
    assert all(
        r.state == EffectState.SUCCEEDED and r.result and "url" in r.result
        for r in receipts.values()
    )
    assert world.run_row().state == RunState.SUCCEEDED
    with world.store.read() as session:
        [link] = published_links(session, [KEY])[KEY]  # the thread's link: its first status
    with world.store.transaction() as session:  # read back and counted by its first status
        now = lease_now(session, world.clock)
        assert take_up_publications(session, now, lambda _: timedelta(minutes=2)) == 1
    first = min(mastodon.statuses_of(), key=lambda s: int(s["id"]))
    assert link.url == first["url"]


def test_a_mastodon_thread_refused_for_now_mid_way_resumes_at_that_part(
    db_url: str, worlds: MakeWorld, mastodon: FakeMastodon
) -> None:
    world = mastodon_world(worlds, db_url, mastodon)
    approved_thread(world)
    mastodon.script("create", social.accept(), social.accept(), social.status(503))
    first = world.service().publish_run(RUN)
    assert first.outcome == PublishOutcome.WAITING and "part 3" in (first.detail or "")
    assert world.run_row().state == RunState.PUBLISHING  # not published until every part is
    world.clock.advance(timedelta(minutes=1))
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert_a_mastodon_thread(mastodon)


def test_a_mastodon_part_whose_answer_was_lost_is_found_in_its_place_not_sent_twice(
    db_url: str, worlds: MakeWorld, mastodon: FakeMastodon
) -> None:
    world = mastodon_world(worlds, db_url, mastodon)
    approved_thread(world)
    mastodon.script("create", social.accept(), social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    assert len(mastodon.statuses_of()) == 2
    with world.store.read() as session:  # Edit is refused naming the target once, by its part
        said = frozen_text(session, KEY) or ""
    assert said.count(mastodon_target(mastodon)) == 1 and "part 2 sent, outcome unknown" in said
    world.clock.advance(MASTODON_READ_DELAY)  # looked up once Mastodon would show it
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert_a_mastodon_thread(mastodon)
    assert len(mastodon.requests_to("/api/v1/statuses", "POST")) == 4  # part 2 found, not re-sent


def test_a_mastodon_part_marked_published_by_a_person_stops_the_thread_never_posts_outside_it(
    db_url: str, worlds: MakeWorld, mastodon: FakeMastodon
) -> None:
    """Mark published on an uncertain part 2 is not the whole thread: the run publishes on,
    and part 3, with no status id to reply to, fails the run instead of posting alone."""
    world = mastodon_world(worlds, db_url, mastodon)
    approved_thread(world)
    mastodon.script("create", social.accept(), social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    said = world.resolver().resolve(RUN, Finding.PUBLISHED, actor="U0ADMIN")
    assert "other targets publish next" in said
    assert world.run_row().state == RunState.PUBLISHING  # not succeeded: parts 3 and 4 are not out
    result = world.service().publish_run(RUN)
    assert result.outcome == PublishOutcome.FAILED and "part 3" in (result.detail or "")
    assert "marked published by a person" in (result.detail or "")
    assert len(mastodon.statuses_of()) == 2
    assert len(mastodon.requests_to("/api/v1/statuses", "POST")) == 2  # part 3 never asked
    assert world.run_row().state == RunState.FAILED


def look_alike(fake: FakeMastodon, text: str) -> str:
    """The same words posted on the account by hand, outside the thread: another post."""
    answer = httpx.post(
        f"{fake.url}/api/v1/statuses",
        data={"status": text},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=5,
    )
    answer.raise_for_status()
    return str(answer.json()["id"])


def test_a_lost_part_is_found_in_its_place_never_as_a_look_alike_elsewhere_on_the_account(
    db_url: str, worlds: MakeWorld, mastodon: FakeMastodon
) -> None:
    """Part 2's answer lost, and the same words posted alone since: the look-up takes the
    reply to part 1, so part 3 replies to the thread's part 2, not to the look-alike."""
    world = mastodon_world(worlds, db_url, mastodon)
    approved_thread(world)
    mastodon.script("create", social.accept(), social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    alike = look_alike(mastodon, PARTS[1])
    world.clock.advance(MASTODON_READ_DELAY)
    assert world.service("w2").publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    thread = sorted(
        (s for s in mastodon.statuses_of() if s["id"] != alike), key=lambda s: int(s["id"])
    )
    assert [s["source_text"] for s in thread] == list(PARTS)
    for before, status in itertools.pairwise(thread):
        assert status["in_reply_to_id"] == before["id"]
    part_2 = world.effect(publish_part_key(KEY, mastodon_target(mastodon), 2))
    assert part_2 is not None and part_2.external_id == thread[1]["id"]


def test_an_orphaned_later_part_is_looked_up_in_its_place_never_as_a_look_alike(
    db_url: str, worlds: MakeWorld, mastodon: FakeMastodon
) -> None:
    """Cancelled while part 2's answer was lost: the orphan pass settles part 2 by the
    reply to part 1, not by the same words posted alone on the account since."""
    world = mastodon_world(worlds, db_url, mastodon)
    approved_thread(world)
    mastodon.script("create", social.accept(), social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    world.resolver().cancel(RUN, actor="U0ADMIN")
    alike = look_alike(mastodon, PARTS[1])
    world.clock.advance(MASTODON_READ_DELAY)
    world.service().publish_pending()
    part_2 = world.effect(publish_part_key(KEY, mastodon_target(mastodon), 2))
    assert part_2 is not None and part_2.state == EffectState.SUCCEEDED
    real = [s for s in mastodon.statuses_of() if s["source_text"] == PARTS[1] and s["id"] != alike]
    assert part_2.external_id == real[0]["id"]
    assert len(mastodon.requests_to("/api/v1/statuses", "POST")) == 3  # nothing sent again


def test_a_bluesky_thread_marked_published_by_a_person_is_settled_by_its_one_receipt(
    db_url: str, worlds: MakeWorld, pds: FakeBluesky
) -> None:
    world = bluesky_world(worlds, db_url, pds)
    approved_thread(world)
    pds.script("read", social.status(503))  # the first look-up cannot tell: it sends
    pds.script("create", social.accept_then_drop())
    assert world.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    world.resolver().resolve(RUN, Finding.PUBLISHED, actor="U0ADMIN")
    world.service().publish_run(RUN)  # its receipt answers for every part: nothing is sent
    assert world.run_row().state == RunState.SUCCEEDED
    assert len(pds.posts_of(DID)) == 4
    assert len(pds.requests_to("com.atproto.repo.applyWrites")) == 1


# --- Slack: replies in the first message's thread ---------------------------------------


def test_a_slack_thread_is_the_first_message_and_replies_in_its_thread(
    db_url: str, worlds: MakeWorld
) -> None:
    world = worlds(db_url, target="slack")
    approved_thread(world)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [first, *replies] = sorted(world.announced(), key=lambda m: float(m["ts"]))
    assert "thread_ts" not in first and len(replies) == 3
    assert all(r["thread_ts"] == first["ts"] for r in replies)
    assert [m["text"] for m in (first, *replies)] == list(PARTS)
    thread_calls = world.slack.calls("conversations.replies")
    assert thread_calls  # each later part looked for in the thread before it was sent
    keys = {r.key: r.external_id for r in world.publish_effects()}
    target = f"slack:{ANNOUNCE}"
    assert [keys[publish_part_key(KEY, target, n)] for n in (1, 2, 3, 4)] == [
        m["ts"] for m in (first, *replies)
    ]


def test_a_target_that_takes_no_thread_is_refused_never_split(
    db_url: str, worlds: MakeWorld
) -> None:
    world = worlds(db_url)  # the webhook publishes no thread
    approved_thread(world)
    result = world.service().publish_run(RUN)
    assert result.outcome == PublishOutcome.FAILED and "does not publish threads" in (
        result.detail or ""
    )
    assert world.posts() == 0


def test_a_plain_version_for_one_target_beside_a_thread_publishes_each_its_own(
    db_url: str, worlds: MakeWorld
) -> None:
    world = worlds(db_url)  # the webhook gets its own single version; no thread for it
    body = PostBody({"webhook": ("One plain post for the webhook.",), "*": PARTS})
    approved_thread(world, body)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert world.posts() == 1
