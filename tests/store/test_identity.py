"""Identities are pure functions of the scheduled slot (docs/design.md §2)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.failpoints import Failpoint, hook
from core.identity import (
    HEADER_KEY_MAX,
    REVIEW_GONE,
    REVIEW_POST,
    alert_key,
    alert_settled_key,
    attempt_id,
    bluesky_record_key,
    digest_key,
    draft_alert_key,
    draft_key,
    header_key,
    is_reminder_key,
    notice_key,
    parse_alert_key,
    parse_run_id,
    payload_hash,
    publish_effect_key,
    recipe_of_run,
    redraft_key,
    reminder_key,
    review_effect_key,
    review_update_key,
    run_id,
    run_id_range,
    run_of_key,
    slack_channel_of_publish_key,
    slack_target,
    slot_wall_of_run,
    tid_time,
)
from core.policies import DstRepeat
from core.setup.config import Recipe
from core.slots.schedule import slots_between
from tests.conftest import make_config


def test_keys_read_as_the_contract_shows() -> None:
    run = run_id("weekly-update", datetime(2026, 10, 20, 9, 0))
    assert run == "weekly-update@2026-10-20T09:00"
    assert attempt_id(run, 2) == "weekly-update@2026-10-20T09:00#2"
    key = draft_key("linkedin", run, 3)
    assert key == "linkedin|weekly-update@2026-10-20T09:00|v3"
    assert review_effect_key(key) == f"{key}|review"
    assert publish_effect_key(key, "slack:C1") == f"{key}|publish:slack:C1"
    assert parse_run_id(run) == ("weekly-update", datetime(2026, 10, 20, 9, 0), 1)


def test_payload_hash_ignores_key_order_but_not_values() -> None:
    assert payload_hash({"a": 1, "b": [1, 2]}) == payload_hash({"b": [1, 2], "a": 1})
    assert payload_hash({"a": 1}) != payload_hash({"a": 2})


def _daily(at: str, repeat: DstRepeat = DstRepeat.FIRST, zone: str = "Europe/London") -> Recipe:
    base = make_config().recipes["weekly-update"]
    minute, hour = at.split(":")[1], at.split(":")[0]
    return base.model_copy(
        update={
            "schedule": f"{int(minute)} {int(hour)} * * *",
            "timezone": zone,
            "dst_repeat": repeat,
        }
    )


def test_fall_back_maps_the_repeated_hour_to_one_run_in_london() -> None:
    recipe = _daily("01:30")
    window = slots_between(
        recipe, datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 26, 12, tzinfo=UTC)
    )
    ids = [s.run_id(recipe.name) for s in window]
    assert ids == ["weekly-update@2026-10-25T01:30", "weekly-update@2026-10-26T01:30"]
    assert window[0].fire_at == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # the first pass, BST


def test_fall_back_under_both_names_the_second_pass_apart() -> None:
    recipe = _daily("01:30", DstRepeat.BOTH)
    window = slots_between(
        recipe, datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 25, 12, tzinfo=UTC)
    )
    assert [s.run_id(recipe.name) for s in window] == [
        "weekly-update@2026-10-25T01:30",
        "weekly-update@2026-10-25T01:30~2",
    ]


def test_spring_forward_keeps_the_nominal_wall_time_as_the_run_id() -> None:
    recipe = _daily("02:30", zone="America/New_York")
    window = slots_between(
        recipe, datetime(2026, 3, 7, 12, tzinfo=UTC), datetime(2026, 3, 8, 12, tzinfo=UTC)
    )
    [slot] = window
    assert slot.run_id(recipe.name) == "weekly-update@2026-03-08T02:30"  # the scheduled time
    assert slot.fire_at == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # 03:00 EDT, just past the gap


# --- record keys and header keys derived from effect keys ----------------------------------

TID = re.compile(r"^[234567abcdefghij][234567abcdefghijklmnopqrstuvwxyz]{12}$")  # the spec's
SLOT = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)  # the run's wall time, read as UTC
BSKY_KEY = "bluesky|weekly-update@2026-10-20T09:00|v3|publish:bluesky:acme.bsky.social"


def test_a_record_key_is_a_valid_tid_and_the_same_for_the_same_effect_key() -> None:
    rkey = bluesky_record_key(BSKY_KEY)
    assert TID.match(rkey), rkey
    assert bluesky_record_key(BSKY_KEY) == rkey  # a retry, a replica, a restored backup


def test_a_record_key_carries_the_slot_time_within_about_a_second() -> None:
    at = tid_time(bluesky_record_key(BSKY_KEY))
    assert SLOT <= at < SLOT + timedelta(seconds=1.05)


def test_record_keys_sort_by_slot_and_tell_keys_of_one_slot_apart() -> None:
    later = bluesky_record_key(BSKY_KEY.replace("2026-10-20", "2026-10-27"))
    assert bluesky_record_key(BSKY_KEY) < later
    keys = {bluesky_record_key(BSKY_KEY.replace("|v3|", f"|v{n}|")) for n in range(500)}
    assert len(keys) == 500
    second_pass = BSKY_KEY.replace("T09:00|", "T09:00~2|")  # a repeated DST hour
    assert bluesky_record_key(second_pass) != bluesky_record_key(BSKY_KEY)


def test_a_record_key_needs_a_run_id_in_the_effect_key() -> None:
    with pytest.raises(ValueError, match="run id"):
        bluesky_record_key("not-a-key")


def test_a_header_key_is_the_effect_key_when_short_else_a_stable_hash() -> None:
    short = "linkedin|w@2026-10-20T09:00|v1|publish:webhook"
    assert header_key(short) == short
    long = BSKY_KEY + "|" + "x" * 100
    hashed = header_key(long)
    assert hashed == header_key(long) and hashed != header_key(long + "y")
    assert hashed.startswith("galley-") and len(hashed) <= HEADER_KEY_MAX
    assert header_key("café|w@2026-10-20T09:00|v1").startswith("galley-")  # headers are ASCII


def test_a_run_id_reads_back_as_its_recipe_and_stored_slot_wall() -> None:
    second = run_id("weekly-update", datetime(2026, 10, 25, 1, 30), occurrence=2)
    assert recipe_of_run(second) == "weekly-update"
    assert slot_wall_of_run(second) == "2026-10-25T01:30~2"  # as `runs.slot_wall` stores it
    after, before = run_id_range("weekly-update")
    assert after < second < before
    assert not after < run_id("weekly-update-2", datetime(2026, 10, 25, 1, 30)) < before


def test_alert_keys_are_built_and_read_back_in_one_place() -> None:
    run = run_id("weekly-update", datetime(2026, 10, 20, 9, 0))
    episode = alert_key(run, "uncertain", datetime(2026, 10, 20, 8, 0, tzinfo=UTC))
    assert episode == f"alert|{run}|uncertain|2026-10-20T08:00:00+00:00"
    reminder = reminder_key(episode, 2)
    assert (is_reminder_key(episode), is_reminder_key(reminder)) == (False, True)
    assert parse_alert_key(episode) == parse_alert_key(reminder) == (run, "uncertain")
    assert alert_settled_key(episode) == f"{episode}|settled"
    draft = draft_key("linkedin", run, 1)
    assert draft_alert_key(REVIEW_POST, draft) == f"alert|review-post|{draft}"
    with pytest.raises(ValueError):
        draft_alert_key("reminder", draft)


def test_every_kind_of_key_names_its_run_or_none() -> None:
    run = run_id("weekly-update", datetime(2026, 10, 20, 9, 0))
    draft = draft_key("li@nkedin", run, 1)  # a platform may hold "@"; its place tells it apart
    since = datetime(2026, 10, 20, 8, 0, tzinfo=UTC)
    named = [
        draft,
        review_effect_key(draft),
        review_update_key(draft, "approved", 2),
        publish_effect_key(draft, "slack:C1"),
        redraft_key(draft, 1),
        alert_key(run, "failed", since),
        alert_settled_key(reminder_key(alert_key(run, "uncertain", since), 1)),
        draft_alert_key(REVIEW_POST, draft),
        draft_alert_key(REVIEW_GONE, draft),
    ]
    assert [run_of_key(key) for key in named] == [run] * len(named)
    unnamed = [notice_key("weekly-update", since.isoformat(), "paused"), digest_key("2026-10-20")]
    assert [run_of_key(key) for key in unnamed] == [None, None]


def test_a_slack_publication_names_its_channel_and_no_other_key_does() -> None:
    draft = draft_key("linkedin", run_id("weekly-update", datetime(2026, 10, 20, 9, 0)), 1)
    assert slack_channel_of_publish_key(publish_effect_key(draft, slack_target("C1"))) == "C1"
    assert slack_channel_of_publish_key(publish_effect_key(draft, "webhook:hook")) == ""
    assert slack_channel_of_publish_key(review_effect_key(draft)) == ""


_AD_HOC_KEY_CODE = ('partition("@")', 'split("|")', 'startswith("recipe bumped")', '"|settled"')


def test_keys_are_parsed_nowhere_but_identity() -> None:
    root = Path(__file__).resolve().parents[2]
    found = [
        f"{path.relative_to(root)}: {needle}"
        for folder in ("core", "bot", "galley")
        for path in sorted((root / folder).rglob("*.py"))
        if path.name != "identity.py"
        for needle in _AD_HOC_KEY_CODE
        if needle in path.read_text(encoding="utf-8")
    ]
    assert found == []


def test_a_misspelt_failpoint_hook_is_refused() -> None:
    with pytest.raises(ValueError), hook("after_claim_comit", lambda: None):
        pass
    with hook(Failpoint.AFTER_CLAIM_COMMIT, lambda: None):
        pass


def test_a_threads_first_part_keeps_the_targets_key_and_later_parts_read_back() -> None:
    """docs/design.md §31: every receipt made before threads stays valid; a later part's key
    is readable and parses back to its draft, target and number."""
    from core.identity import (
        bluesky_part_record_key,
        draft_of_publish_key,
        part_of_publish_key,
        publish_part_key,
        slack_channel_of_publish_key,
        target_of_publish_key,
    )

    draft = "social|weekly-update@2026-11-23T09:00|v1"
    assert publish_part_key(draft, "mastodon:m.social", 1) == publish_effect_key(
        draft, "mastodon:m.social"
    )
    third = publish_part_key(draft, "slack:C0ANNOUNCE", 3)
    assert third == f"{draft}|publish:slack:C0ANNOUNCE|part:3"
    assert (draft_of_publish_key(third), target_of_publish_key(third)) == (
        draft,
        "slack:C0ANNOUNCE",
    )
    assert part_of_publish_key(third) == 3
    assert part_of_publish_key(publish_effect_key(draft, "webhook")) == 1
    assert slack_channel_of_publish_key(third) == "C0ANNOUNCE"
    with pytest.raises(ValueError):
        publish_part_key(draft, "webhook", 0)
    first = publish_effect_key(draft, "bluesky:acme.bsky.social")
    keys = [bluesky_part_record_key(first, n) for n in (1, 2, 3, 4)]
    assert keys[0] == bluesky_record_key(first) and len(set(keys)) == 4
    assert keys == [bluesky_part_record_key(first, n) for n in (1, 2, 3, 4)]  # same every time
