"""A bad config file is rejected before anything runs, one line per problem (docs/design.md §15)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.errors import ConfigError
from core.policies import Overlap
from core.setup.config import parse_config
from core.setup.durations import format_duration, parse_duration
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

    from core.setup.config import load_config

    config = load_config(Path(__file__).parents[2] / "examples" / "galley.toml")
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
    top, defaults = problems_of(text)
    assert top == "config: surprise: unknown key (valid keys: defaults, egress, recipes, slack)"
    valid = "[defaults]: limit: unknown key (valid keys: approval_stages, approval_ttl, "
    assert defaults.startswith(valid)


def test_an_unknown_key_names_the_one_likely_meant_and_every_key_the_table_takes() -> None:
    """A newcomer's typo, in a recipe, in [defaults] and in a publish target."""
    text = config_text().replace("[defaults]\n", '[defaults]\nmodle = "x"\n')
    text = text.replace(
        "prompt = ",
        'promt = "x"\npublish = { to = "mastodon", instanse = "https://m.test" }\nprompt = ',
    )
    problems = problems_of(text)
    assert problems[0].startswith("[defaults]: modle: unknown key; did you mean 'model'? (valid")
    [recipe_line] = [p for p in problems if ": promt:" in p]
    assert "did you mean 'prompt'?" in recipe_line and "publish" in recipe_line
    assert "targets" not in recipe_line  # the file's word, not the model's field
    [target_line] = [p for p in problems if "instanse" in p]
    assert target_line.endswith(
        "publish.instanse: unknown key; did you mean 'instance'? "
        "(valid keys: instance, read_delay, secret_env, to, visibility)"
    )


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


# --- publish targets (docs/design.md §24) ---------------------------------------------------


def targets_of(publish: str) -> list[str]:
    config = parse_config(config_text() + recipe(extra=publish))
    return [target.target for target in config.recipes["second"].targets]


def test_publish_is_one_table_a_list_of_them_or_none() -> None:
    one = "publish = { to = 'bluesky', handle = 'acme.bsky.social' }"
    assert targets_of(one) == ["bluesky:acme.bsky.social"]
    many = (
        "publish = [{ to = 'mastodon', instance = 'https://Mastodon.social/' },\n"
        "  { to = 'linkedin', author = 'urn:li:organization:123' },\n"
        "  { to = 'slack', channel = 'C0ANNOUNCE' }, { to = 'webhook', url = 'https://h.test/' }]"
    )
    assert targets_of(many) == [
        "mastodon:mastodon.social",
        "linkedin:urn:li:organization:123",
        "slack:C0ANNOUNCE",
        "webhook",
    ]
    assert targets_of("publish = []") == []
    assert targets_of("") == []


def test_the_first_target_stays_recipe_publish_for_single_target_code() -> None:
    config = parse_config(
        config_text()
        + recipe(
            extra="publish = [{ to = 'slack', channel = 'C1' }, { to = 'slack', channel = 'C2' }]"
        )
    )
    second = config.recipes["second"]
    assert second.publish is not None and second.publish.target == "slack:C1"
    assert parse_config(config_text() + recipe()).recipes["second"].publish is None


def test_target_defaults_match_the_contract() -> None:
    config = parse_config(
        config_text()
        + recipe(
            extra="publish = [{ to = 'bluesky', handle = 'acme.bsky.social' },\n"
            "  { to = 'mastodon', instance = 'https://mastodon.social' },\n"
            "  { to = 'linkedin', author = 'urn:li:person:abc123' }]"
        )
    )
    bluesky, mastodon, linkedin = config.recipes["second"].targets
    assert (bluesky.service, bluesky.secret_env) == (  # type: ignore[union-attr]
        "https://bsky.social",
        "GALLEY_BLUESKY_PASSWORD",
    )
    assert (mastodon.visibility, mastodon.secret_env) == (  # type: ignore[union-attr]
        "public",
        "GALLEY_MASTODON_TOKEN",
    )
    assert linkedin.api == "https://api.linkedin.com/rest/"  # type: ignore[union-attr]
    assert linkedin.secret_env == "GALLEY_LINKEDIN_TOKEN"  # type: ignore[union-attr]
    assert not linkedin.is_organization  # type: ignore[union-attr]


def test_two_accounts_on_one_instance_are_told_apart_by_their_variable() -> None:
    assert targets_of(
        "publish = [{ to = 'mastodon', instance = 'https://m.test' },\n"
        "  { to = 'mastodon', instance = 'https://m.test', secret_env = 'TEAM_TOKEN' }]"
    ) == ["mastodon:m.test", "mastodon:m.test+TEAM_TOKEN"]


@pytest.mark.parametrize(
    ("publish", "expected"),
    [
        (
            "publish = [{ to = 'slack', channel = 'C1' }, { to = 'slack', channel = 'C1' }]",
            "recipe 'second': publish: duplicate target 'slack:C1'",
        ),
        (
            "publish = [{ to = 'mastodon', instance = 'https://m.test' },"
            " { to = 'mastodon', instance = 'https://M.test/' }]",
            "recipe 'second': publish: duplicate target 'mastodon:m.test'",
        ),
        (
            "publish = { to = 'bluesky', handle = '@acme.bsky.social' }",
            "recipe 'second': publish.handle:",
        ),
        (
            "publish = { to = 'bluesky', handle = 'acme' }",
            "recipe 'second': publish.handle:",
        ),
        (
            "publish = { to = 'bluesky', handle = 'a.b', service = 'bsky' }",
            "recipe 'second': publish.service:",
        ),
        (
            "publish = { to = 'mastodon' }",
            "recipe 'second': publish.instance: missing required field",
        ),
        (
            "publish = { to = 'mastodon', instance = 'https://m.test', visibility = 'friends' }",
            "recipe 'second': publish.visibility:",
        ),
        (
            "publish = [{ to = 'slack', channel = 'C1' },"
            " { to = 'linkedin', author = 'urn:li:company:1' }]",
            "recipe 'second': publish[2].author: must be urn:li:organization:N or urn:li:person:ID",
        ),
        (
            "publish = { to = 'linkedin', author = 'urn:li:person:x', version = '2025-11' }",
            "recipe 'second': publish.version:",
        ),
        (
            "publish = { to = 'linkedin', author = 'urn:li:person:x', secret_env = 'MY-TOKEN' }",
            "recipe 'second': publish.secret_env: not an environment variable name",
        ),
        ("publish = { to = 'slack', channel = 'C1|x' }", "recipe 'second': publish.channel:"),
        (
            "publish = { to = 'discord', channel = '#news' }",
            "recipe 'second': publish.channel: must be a Discord channel id",
        ),
        (
            "publish = { to = 'discord', channel = '1', api = 'discord.com' }",
            "recipe 'second': publish.api: not an http(s) base URL",
        ),
        ("publish = 'slack'", "recipe 'second': publish: must be a target table"),
        ("publish = [{ to = 'fax' }]", "recipe 'second': publish[1]:"),
    ],
)
def test_each_bad_target_is_one_line_naming_the_recipe_and_field(
    publish: str, expected: str
) -> None:
    problems = problems_of(config_text() + recipe(extra=publish))
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_a_missing_secret_is_one_line_naming_the_variable() -> None:
    config = parse_config(
        config_text()
        + recipe(
            extra="publish = [{ to = 'bluesky', handle = 'acme.bsky.social' },\n"
            "  { to = 'linkedin', author = 'urn:li:person:x', secret_env = 'LI_TEAM' }]"
        )
    )
    env = {"GALLEY_BLUESKY_PASSWORD": "app-pass", "LI_TEAM": "  "}
    assert config.missing_secrets(env) == [
        "recipe 'second': publish: LI_TEAM is not set: linkedin:urn:li:person:x needs it to publish"
    ]
    assert config.missing_secrets({**env, "LI_TEAM": "t"}) == []


def test_a_discord_target_names_its_channel_and_needs_its_bot_token() -> None:
    """`galley check` and `galley run` refuse through `missing_secrets`, as for the others."""
    config = parse_config(
        config_text()
        + recipe(
            extra="publish = [{ to = 'discord', channel = '1250000000000000001' },\n"
            "  { to = 'discord', channel = '1250000000000000001', secret_env = 'DC_TEAM' }]"
        )
    )
    first, second = config.recipes["second"].targets
    assert (first.target, second.target) == (
        "discord:1250000000000000001",
        "discord:1250000000000000001+DC_TEAM",
    )
    assert config.missing_secrets({"DC_TEAM": "t"}) == [
        "recipe 'second': publish: GALLEY_DISCORD_TOKEN is not set: "
        "discord:1250000000000000001 needs it to publish"
    ]
    assert config.missing_secrets({"DC_TEAM": "t", "GALLEY_DISCORD_TOKEN": "b"}) == []


def test_the_readme_names_every_key_of_every_publish_target() -> None:
    """`service`, `api`, `version`: a key only a comment mentions is a key nobody finds."""
    from core.setup.publish_targets import TARGETS
    from tests.harness.processes import REPO

    readme = (REPO / "README.md").read_text()
    for to, model in TARGETS.items():
        [row] = [line for line in readme.splitlines() if line.startswith(f"| `{to}` |")]
        missing = [key for key in model.model_fields if f"`{key}`" not in row and key != "to"]
        assert missing == [], (to, missing)
