"""An item run's id (docs/design.md §29): readable, hashed when long or unsafe, parsed only
in core/identity.py; and the items trigger's config keys, refused where they do not fit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.errors import ConfigError
from core.identity import (
    bluesky_record_key,
    draft_key,
    is_run_id,
    item_run_id,
    item_run_range,
    item_token,
    item_token_of_run,
    parse_run_id,
    publish_effect_key,
    recipe_of_run,
    run_id,
    run_of_key,
    slot_wall_of_run,
)
from core.policies import Trigger
from core.setup.config import parse_config
from core.slots.schedule import slot_of_run
from tests.conftest import config_text, make_config

SOURCE = '\nsource = { kind = "feed", url = "https://blog.example.com/feed.xml" }\n'


def test_a_short_plain_item_key_is_the_run_ids_own_words() -> None:
    run = item_run_id("release-notes", item_token("release:1234"))

    assert run == "release-notes@item:release:1234"
    assert recipe_of_run(run) == "release-notes" and is_run_id(run)
    assert item_token_of_run(run) == "release:1234"
    assert item_token_of_run(run_id("release-notes", datetime(2026, 1, 1, 9))) is None


@pytest.mark.parametrize(
    "key",
    [
        "https://blog.example.com/2026/12/a-long-title-" + "x" * 120,
        "https://blog.example.com/?p=12#comments",  # '#' would read as an attempt number
        "tag:blog|2026:12",  # '|' separates a draft key's parts
        "urn:uuid:1 2~2",
    ],
)
def test_a_long_or_unsafe_item_key_is_cut_readably_and_hashed(key: str) -> None:
    token = item_token(key)

    assert len(token) <= 100 and "=" in token
    assert not set(token) & set("|#~@ ")
    assert token != item_token(key + "!")  # the hash tells keys apart
    run = item_run_id("blog", token)
    assert run_of_key(publish_effect_key(draft_key("bluesky", run, 1), "bluesky:a.b")) == run


def test_run_id_parsers_cope_with_item_runs() -> None:
    run = item_run_id("blog", "guid-7")
    with pytest.raises(ValueError, match="names no slot"):
        parse_run_id(run)
    with pytest.raises(ValueError, match="names no slot"):
        slot_wall_of_run(run)
    first, last = item_run_range("blog")
    assert first < run < last
    slot = slot_of_run(
        make_config().recipe("weekly-update"), run, datetime(2026, 12, 4, 9, tzinfo=UTC)
    )
    assert slot is not None and slot.item == "guid-7" and slot.run_id("blog") == run


def test_an_item_runs_bluesky_record_key_is_fixed_by_its_key() -> None:
    key = publish_effect_key(draft_key("bluesky", item_run_id("blog", "guid-7"), 1), "bluesky:a")

    assert bluesky_record_key(key) == bluesky_record_key(key)
    assert bluesky_record_key(key) != bluesky_record_key(key.replace("guid-7", "guid-8"))


def test_an_items_recipe_reads_one_source_with_backfill_and_item_ttl() -> None:
    recipe = parse_config(
        config_text() + 'trigger = "items"\nbackfill = 2\nitem_ttl = "3d"' + SOURCE
    ).recipe("weekly-update")

    assert recipe.trigger == Trigger.ITEMS and recipe.backfill == 2
    assert recipe.item_ttl.days == 3 and len(recipe.sources) == 1
    assert recipe.sources[0].max_items == 500  # a poll sees every entry served


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ('trigger = "items"\n', 'source: trigger = "items" reads one `source'),
        (SOURCE, 'source: only with trigger = "items"'),
        ("backfill = 2\n", 'backfill: only with trigger = "items"'),
        ('trigger = "items"\nsource = { kind = "feed", url = "ftp://x" }\n', "source.url: want"),
        ('trigger = "items"\ndraft_ahead = "1h"' + SOURCE, "draft_ahead: an items recipe"),
        ('trigger = "items"\nbackfill = -1' + SOURCE, "backfill: must be at least 0"),
        (
            'trigger = "items"\ndrafting = "batch"' + SOURCE,
            'drafting: "batch" does not go with trigger = "items"',
        ),
    ],
)
def test_item_keys_that_do_not_fit_are_refused_naming_the_key(extra: str, problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(config_text() + extra)

    assert any(problem in line for line in refused.value.problems)
