"""A config problem is told in words for people, one line each, naming the file when the
file itself cannot be read: wrong types are refused, never converted."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from core.errors import ConfigError
from core.setup.config import parse_config
from tests.conftest import config_text


def problems_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return caught.value.problems


@pytest.mark.parametrize(
    ("section", "line", "problem"),
    [
        (
            "[slack]",
            'digest = "yes"',
            '[slack]: digest: want true or false, without quotes, got "yes"',
        ),
        (
            "[defaults]",
            'max_tokens = "1024"',
            '[defaults]: max_tokens: want a whole number, without quotes, got "1024"',
        ),
        ("[defaults]", "daily_token_budget = true", "[defaults]: daily_token_budget: want a whole"),
        ("[defaults]", "similar_warn = 78.0", "[defaults]: similar_warn: want a whole number"),
        (
            "[defaults]",
            "review_window = 48",
            "[defaults]: review_window: want a duration in quotes",
        ),
        ("[slack]", 'approvers = "U0EDITOR"', "[slack]: approvers: want a list in brackets"),
        ("[slack]", "alert_channel = 5", "[slack]: alert_channel: want text in quotes, got 5"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_in_one_line(
    section: str, line: str, problem: str
) -> None:
    text = config_text().replace(section, f"{section}\n{line}", 1)
    problems = problems_of(text)
    assert len(problems) == 1, problems
    assert problems[0].startswith(problem), problems


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('digest_at = "9am"', "digest_at: want a time of day as HH:MM on a 24-hour clock"),
        ('overlap = "sometimes"', "overlap: want 'skip' or 'queue_one', got \"sometimes\""),
        ("similar_warn = 101", "similar_warn: must be at most 100, got 101"),
        ("pending_limit = -1", "pending_limit: must be at least 0, got -1"),
        ('platform = "a|b"', "platform: must not contain '|'"),
        (
            'publish = { to = "fax" }',
            "publish: to: want one of 'slack', 'webhook', 'bluesky', 'mastodon', 'linkedin', "
            "'discord', 'threads', 'telegram', got \"fax\"",
        ),
    ],
)
def test_no_problem_is_worded_by_pydantic(line: str, problem: str) -> None:
    key = line.split(" = ")[0]
    section = "[slack]" if key == "digest_at" else "[[recipes]]"
    text = config_text()
    if section == "[[recipes]]":
        text = text.replace(f"\n{key} = ", f"\n# {key} = ")  # the recipe's own, if any
    problems = problems_of(text.replace(section, f"{section}\n{line}", 1))
    assert len(problems) == 1 and problem in problems[0], problems
    for pydantic_words in ("should", "Input", "pattern", "Value error"):
        assert pydantic_words not in problems[0]


def test_a_name_with_capitals_is_told_what_a_name_may_hold() -> None:
    text = config_text().replace('name = "weekly-update"', 'name = "Weekly Update"')
    assert problems_of(text) == [
        "recipe 'Weekly Update': name: use lower-case letters, digits and '-', starting with "
        'a letter or digit, got "Weekly Update"'
    ]


def test_galley_check_names_the_file_with_a_toml_syntax_error(tmp_path: Path) -> None:
    config = tmp_path / "galley.toml"
    config.write_text(config_text().replace("[defaults]", "[defaults"))
    env = {"GALLEY_CONFIG": str(config), "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'g.db'}"}
    result = CliRunner().invoke(app, ["check"], env=env)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{config}: not valid TOML: ")


def test_galley_check_names_the_variable_when_the_file_is_missing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"
    env = {"GALLEY_CONFIG": str(missing), "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'g.db'}"}
    result = CliRunner().invoke(app, ["check"], env=env)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"GALLEY_CONFIG: cannot read {missing}: No such file or directory"
    ]
