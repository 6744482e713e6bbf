"""A draft key becomes a Message Batches `custom_id` (docs/design.md §21): always valid for the
API, the same for the same key, different for different keys, and readable."""

from __future__ import annotations

from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from core.identity import CUSTOM_ID_PATTERN, batch_custom_id, draft_key, run_id

recipes = st.from_regex(r"[a-z0-9][a-z0-9-]{0,63}", fullmatch=True)
platforms = st.text(st.characters(blacklist_characters="|"), min_size=1, max_size=40)
walls = st.datetimes(datetime(2000, 1, 1), datetime(2099, 12, 31)).map(
    lambda d: d.replace(second=0, microsecond=0)
)
draft_keys = st.builds(
    lambda platform, recipe, wall, pass_, version: draft_key(
        platform, run_id(recipe, wall, pass_), version
    ),
    platforms,
    recipes,
    walls,
    st.sampled_from([1, 2]),
    st.integers(min_value=1, max_value=10**9),
)


def test_the_custom_id_reads_as_recipe_slot_and_version() -> None:
    key = draft_key("linkedin", run_id("weekly-update", datetime(2026, 10, 20, 9)), 3)
    custom_id = batch_custom_id(key)
    assert custom_id.startswith("weekly-update_20261020T0900_v3_")
    assert CUSTOM_ID_PATTERN.match(custom_id)


def test_the_second_pass_of_a_repeated_hour_reads_apart() -> None:
    first = draft_key("x", run_id("daily", datetime(2026, 10, 25, 1, 30)), 1)
    second = draft_key("x", run_id("daily", datetime(2026, 10, 25, 1, 30), 2), 1)
    assert batch_custom_id(first).startswith("daily_20261025T0130_v1_")
    assert batch_custom_id(second).startswith("daily_20261025T0130-2_v1_")


def test_a_long_recipe_name_is_cut_before_the_slot_and_version_are() -> None:
    key = draft_key("blog", run_id("r" * 64, datetime(2026, 1, 5, 7)), 12)
    custom_id = batch_custom_id(key)
    assert len(custom_id) == 64
    assert "_20260105T0700_v12_" in custom_id


def test_keys_that_differ_only_in_platform_share_the_prefix_not_the_id() -> None:
    run = run_id("weekly-update", datetime(2026, 10, 20, 9))
    a, b = batch_custom_id(draft_key("linkedin", run, 1)), batch_custom_id(draft_key("x", run, 1))
    assert a.rsplit("_", 1)[0] == b.rsplit("_", 1)[0]
    assert a != b


@given(draft_keys)
def test_any_draft_key_gives_a_valid_custom_id_again_and_again(key: str) -> None:
    custom_id = batch_custom_id(key)
    assert CUSTOM_ID_PATTERN.match(custom_id)
    assert batch_custom_id(key) == custom_id


@given(st.text(max_size=300))
def test_any_text_at_all_gives_a_valid_custom_id(text: str) -> None:
    assert CUSTOM_ID_PATTERN.match(batch_custom_id(text))


@given(st.lists(draft_keys, min_size=2, max_size=50, unique=True))
def test_distinct_draft_keys_give_distinct_custom_ids(keys: list[str]) -> None:
    assert len({batch_custom_id(k) for k in keys}) == len(keys)
