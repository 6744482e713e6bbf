"""Images and link cards against the reference PDS (docs/design.md §32): the server
Bluesky runs (tests/harness/real_pds.py), not our fake, through Galley's
PublishingService and effect ledger.

Every uploadBlob is counted at the proxy in front of the PDS. The server's own answers
are the proof: the record's embed as `listRecords` returns it, the bytes `getBlob`
serves under each named blob, the blobs `listBlobs` says the repository keeps (only
those a record references) and, for a thread, the CIDs the server computed for records
whose references Galley computed locally before sending (`bluesky_records.record_cid`
over a record that names a blob). Without the installed PDS every test here is skipped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlmodel import select

from core.identity import publish_effect_key, upload_effect_key
from core.models import EffectRow
from core.policies import EffectStep, ImageSource, PublishOutcome
from core.post_body import EVERY_TARGET, ImageRef, PostBody
from core.states import EffectState
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.web import HTML_TYPE, FakeWeb
from tests.harness.real_pds import Account, RealPds, assert_one_thread, real_pds, world_on
from tests.harness.slow_marks import starts_a_server
from tests.harness.worlds import KEY, RUN, MakeWorld, World
from tests.images.pictures import flat, photo

__all__ = ["real_pds"]  # the session's server, a fixture: used by every test below

UPLOAD = "com.atproto.repo.uploadBlob"
APPLY_WRITES = "com.atproto.repo.applyWrites"
EDITOR = "U0EDITOR"
TEXT = "A week of shipping, in two pictures."
THREAD = tuple(f"Part {n} of 3: what we shipped, in order." for n in range(1, 4))
IMAGES = (
    (photo(640, 480), "launch.jpg", "The team at the launch"),
    (flat(400, 300), "chart.png", "A chart of the week's releases"),
)
PAGE = """<!doctype html><html><head><title>Fallback title</title>
<meta property="og:title" content="Release 4.2: faster search">
<meta property="og:description" content="Search is twice as fast &amp; smarter.">
<meta property="og:image" content="/img/card.png">
</head><body>…</body></html>"""


@pytest.fixture
def account(real_pds: RealPds) -> Account:
    return real_pds.new_account()


@pytest.fixture
@starts_a_server
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as server:
        yield server


def approved_with_images(
    world: World, fake_anthropic: FakeAnthropic, account: Account, parts: tuple[str, ...]
) -> list[ImageRef]:
    """Draft, edit the body into `parts` for every target with IMAGES on the first part,
    approve that revision through the fit rule."""
    fake_anthropic.script(ok(text=parts[0]))
    key = world.draft()
    target = f"bluesky:{account.handle}"
    refs = [
        world.core.images.take(data, name, ImageSource.SLACK_FILE, [target], alt=alt).ref
        for data, name, alt in IMAGES
    ]
    body = PostBody({EVERY_TARGET: parts}).with_images(refs).to_text()
    assert world.galley.edit(key, body, revision=1, user=EDITOR).accepted
    answer = world.galley.approve(key, revision=2, user=EDITOR)
    assert answer.accepted, answer.message
    return refs


def upload_receipts(world: World) -> dict[str, EffectRow]:
    """The upload effects, by key."""
    with world.store.read() as session:
        rows = session.exec(select(EffectRow).where(EffectRow.step == EffectStep.UPLOAD))
        return {row.key: row for row in rows}


def assert_images_named(
    pds: RealPds, account: Account, world: World, record: dict[str, Any], refs: list[ImageRef]
) -> None:
    """The record's embed names one blob per image, in order, with its alt text; each is
    the receipt's blob, and the server serves the very bytes approved under it."""
    embed = record["value"]["embed"]
    assert embed["$type"] == "app.bsky.embed.images"
    assert [image["alt"] for image in embed["images"]] == [alt for _, _, alt in IMAGES]
    cids = [str(image["image"]["ref"]["$link"]) for image in embed["images"]]
    receipts = upload_receipts(world)
    keys = [upload_effect_key(KEY, f"bluesky:{account.handle}", ref.sha256) for ref in refs]
    assert sorted(receipts) == sorted(keys)
    for ref, key, cid in zip(refs, keys, cids, strict=True):
        receipt = receipts[key]
        assert receipt.state == EffectState.SUCCEEDED and receipt.external_id == cid
        assert hashlib.sha256(pds.blob(account.did, cid)).hexdigest() == ref.sha256
    assert pds.blob_cids(account.did) == set(cids)  # no stray blob kept


def test_real_pds_a_post_with_two_images_uploads_each_once_and_names_them_with_alt_text(
    db_url: str,
    worlds: MakeWorld,
    fake_anthropic: FakeAnthropic,
    real_pds: RealPds,
    account: Account,
) -> None:
    world = world_on(worlds, db_url, real_pds, account)
    refs = approved_with_images(world, fake_anthropic, account, (TEXT,))
    before = real_pds.proxy.calls(UPLOAD)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert real_pds.proxy.calls(UPLOAD) - before == 2
    [record] = real_pds.records(account.did)
    assert record["value"]["text"] == TEXT
    assert_images_named(real_pds, account, world, record, refs)


def test_real_pds_a_lost_upload_answer_is_sent_again_and_one_post_has_both_images(
    db_url: str,
    worlds: MakeWorld,
    fake_anthropic: FakeAnthropic,
    real_pds: RealPds,
    account: Account,
) -> None:
    world = world_on(worlds, db_url, real_pds, account)
    refs = approved_with_images(world, fake_anthropic, account, (TEXT,))
    real_pds.proxy.lose_answer(UPLOAD)
    before = real_pds.proxy.calls(UPLOAD)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.WAITING
    assert real_pds.records(account.did) == []  # no post without its images

    world.clock.advance(timedelta(minutes=1))
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    [record] = real_pds.records(account.did)
    assert_images_named(real_pds, account, world, record, refs)
    # the lost one sent again under its key (the same bytes: the same blob), no other
    assert real_pds.proxy.calls(UPLOAD) - before == 3
    assert sorted(row.tries for row in upload_receipts(world).values()) == [1, 2]


def test_real_pds_a_thread_whose_first_part_has_images_carries_the_servers_own_cids(
    db_url: str,
    worlds: MakeWorld,
    fake_anthropic: FakeAnthropic,
    real_pds: RealPds,
    account: Account,
) -> None:
    world = world_on(worlds, db_url, real_pds, account)
    refs = approved_with_images(world, fake_anthropic, account, THREAD)
    before = real_pds.proxy.calls(APPLY_WRITES)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert real_pds.proxy.calls(APPLY_WRITES) - before == 1  # the whole thread, one call
    records = real_pds.records(account.did)
    # the replies' root is the record that names the blobs: its CID, computed by Galley
    # before the call, is the one the server computed
    assert_one_thread(records, THREAD)
    [first] = [r for r in records if r["value"]["text"] == THREAD[0]]
    assert_images_named(real_pds, account, world, first, refs)
    assert all("embed" not in r["value"] for r in records if r is not first)


def test_real_pds_a_post_with_a_link_gets_the_pages_card_and_its_thumbnail_once(
    db_url: str,
    worlds: MakeWorld,
    fake_anthropic: FakeAnthropic,
    real_pds: RealPds,
    account: Account,
    web: FakeWeb,
) -> None:
    link = web.publish("/releases/4.2", PAGE, HTML_TYPE)
    thumb = flat(1200, 630)
    web.publish("/img/card.png", thumb, "image/png")
    world = world_on(worlds, db_url, real_pds, account)
    fake_anthropic.script(ok(text=f"Release 4.2 is out: {link}"))
    world.approved()
    before = real_pds.proxy.calls(UPLOAD)
    assert world.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert real_pds.proxy.calls(UPLOAD) - before == 1

    [record] = real_pds.records(account.did)
    embed = record["value"]["embed"]
    assert embed["$type"] == "app.bsky.embed.external"
    external = embed["external"]
    assert external["uri"] == link
    assert external["title"] == "Release 4.2: faster search"
    assert external["description"] == "Search is twice as fast & smarter."
    cid = str(external["thumb"]["ref"]["$link"])
    assert real_pds.blob_cids(account.did) == {cid}
    served = hashlib.sha256(real_pds.blob(account.did, cid)).hexdigest()
    [receipt] = upload_receipts(world).values()  # the thumbnail's, keyed by its bytes
    assert receipt.key == upload_effect_key(KEY, f"bluesky:{account.handle}", served)
    assert receipt.external_id == cid
    post = world.effect(publish_effect_key(KEY, f"bluesky:{account.handle}"))
    assert post is not None and json.loads(post.result or "{}")["card"] == "external"
