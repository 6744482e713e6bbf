"""A bad config file is rejected before anything runs, one line per problem (§5)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.config import parse_config
from core.durations import format_duration, parse_duration
from core.errors import ConfigError
from core.policies import Overlap
from tests.conftest import config_text

RECIPE = """
[[recipes]]
name = "{name}"
platform = "linkedin"
schedule = "{schedule}"
prompt = "{prompt}"
{extra}
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return caught.value.problems


def recipe(
    name: str = "second", schedule: str = "0 9 * * *", prompt: str = "Hi", extra: str = ""
) -> str:
    return RECIPE.format(name=name, schedule=schedule, prompt=prompt, extra=extra)


def test_the_example_config_is_valid() -> None:
    from pathlib import Path

    from core.config import load_config

    config = load_config(Path(__file__).parents[1] / "examples" / "galley.toml")
    assert set(config.recipes) == {"weekly-update", "release-notes"}
    assert config.recipes["release-notes"].pending_limit == 1
    assert config.recipes["weekly-update"].review_window == timedelta(hours=48)


def test_defaults_apply_and_recipes_override_them() -> None:
    config = parse_config(config_text() + recipe(extra='overlap = "queue_one"\npending_limit = 9'))
    assert config.recipes["weekly-update"].pending_limit == 3
    assert config.recipes["second"].pending_limit == 9
    assert config.recipes["second"].overlap == Overlap.QUEUE_ONE
    assert config.recipes["second"].timezone == "Europe/London"


@pytest.mark.parametrize(
    ("fragment", "expected"),
    [
        (recipe(extra="colour = 'blue'"), "recipe 'second': colour: unknown key"),
        (recipe(extra="timezone = 'Mars/Olympus'"), "recipe 'second': timezone: unknown time zone"),
        (recipe(schedule="0 9 * *"), "recipe 'second': schedule: bad cron"),
        (recipe(schedule="61 9 * * *"), "recipe 'second': schedule: bad cron"),
        (recipe(name="weekly-update"), "recipe 'weekly-update': name: duplicate recipe name"),
        (recipe(extra="review_window = '2 days'"), "recipe 'second': review_window: bad duration"),
        (recipe(extra="pending_limit = -1"), "recipe 'second': pending_limit:"),
        (recipe(prompt="Week of {when}"), "recipe 'second': prompt: bad template field 'when'"),
        (recipe(prompt="{slot:%Q"), "recipe 'second': prompt: bad template"),
        (recipe(extra="claim_lease = '1m'"), "recipe 'second': claim_lease: must be longer"),
        (recipe(name="Bad Name"), "recipe 'Bad Name': name:"),
        (recipe(extra="publish = { to = 'fax' }"), "recipe 'second': publish:"),
        (
            '\n[[recipes]]\nname = "third"\nplatform = "x"\nprompt = "p"\n',
            "recipe 'third': schedule: missing required field",
        ),
    ],
)
def test_each_problem_names_the_recipe_and_field(fragment: str, expected: str) -> None:
    problems = problems_of(config_text() + fragment)
    assert any(p.startswith(expected) for p in problems), problems


def test_all_problems_are_reported_at_once() -> None:
    text = config_text() + recipe(schedule="nope", extra="timezone = 'Nowhere/Land'\nfoo = 1")
    problems = problems_of(text.replace('review_channel = "C0REVIEW"', ""))
    assert len(problems) == 4, problems
    assert problems[0].startswith("[slack]: review_channel: missing required field")


def test_unknown_top_level_and_default_keys_are_rejected() -> None:
    text = "surprise = 1\n" + config_text().replace("[defaults]", "[defaults]\nlimit = 2")
    assert problems_of(text) == ["config: unknown key 'surprise'", "[defaults]: limit: unknown key"]


def test_a_file_that_is_not_toml_says_so() -> None:
    [problem] = problems_of("[slack\n")
    assert problem.startswith("config: not valid TOML")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("90m", 5400), ("48h", 172800), ("7d", 604800), ("1h30m", 5400)],
)
def test_durations_parse_to_seconds_and_format_back_to_the_same(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)
    assert parse_duration(format_duration(timedelta(seconds=seconds))).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "10", "m", "1.5h", "-3m", "0s", "3 parsecs"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration(text)
