"""The batch drafting keys of a recipe (docs/design.md §21): defaults, overrides and the
one-line problems a bad value gets."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.drafting_policies import Drafting
from core.errors import ConfigError
from core.setup.config import parse_config

BASE = """
[slack]
review_channel = "C1"

[defaults]
timezone = "Europe/London"
{defaults}

[[recipes]]
name = "weekly-update"
platform = "linkedin"
schedule = "0 9 * * mon"
prompt = "Write it."
{recipe}
"""


def config_text(defaults: str = "", recipe: str = "") -> str:
    return BASE.format(defaults=defaults, recipe=recipe)


def test_a_recipe_drafts_synchronously_unless_told_otherwise() -> None:
    recipe = parse_config(config_text()).recipes["weekly-update"]
    assert recipe.drafting is Drafting.SYNC
    assert recipe.batch_gather == timedelta(seconds=30)
    assert recipe.batch_deadline == timedelta(hours=1)


def test_defaults_and_recipes_set_the_batch_keys() -> None:
    text = config_text('drafting = "batch"\nbatch_gather = "1m"', 'batch_deadline = "3h"')
    recipe = parse_config(text).recipes["weekly-update"]
    assert recipe.drafting is Drafting.BATCH
    assert recipe.batch_gather == timedelta(minutes=1)
    assert recipe.batch_deadline == timedelta(hours=3)


@pytest.mark.parametrize(
    ("recipe", "problem"),
    [
        (
            'drafting = "later"',
            "recipe 'weekly-update': drafting: want 'sync' or 'batch', got \"later\"",
        ),
        ('batch_gather = "soon"', "recipe 'weekly-update': batch_gather: bad duration 'soon'"),
        (
            'batch_gather = "2h"',
            "recipe 'weekly-update': batch_gather: must be shorter than batch_deadline",
        ),
        (
            'batch_deadline = "25h"',
            "recipe 'weekly-update': batch_deadline: must be at most 24h (batches expire then)",
        ),
    ],
)
def test_a_bad_batch_key_is_one_line_naming_recipe_and_field(recipe: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(config_text(recipe=recipe))
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith(problem)


def test_a_bad_default_is_reported_once_for_defaults() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(config_text('drafting = "later"'))
    assert [p.split(":")[0] for p in info.value.problems] == ["[defaults]"]
