"""Identities are pure functions of the scheduled slot (docs/design.md §2)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from core.config import Recipe
from core.identity import (
    HEADER_KEY_MAX,
    attempt_id,
    bluesky_record_key,
    draft_key,
    header_key,
    parse_run_id,
    payload_hash,
    publish_effect_key,
    review_effect_key,
    run_id,
    tid_time,
)
from core.policies import DstRepeat
from core.schedule import slots_between
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
