"""A bad `sources` entry is one line for people: the recipe, `sources[N]` counted from 1
and the key, never pydantic's path or an enum's repr (docs/design.md §26)."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from core.setup.config import parse_config
from tests.conftest import config_text

RECIPE = "recipe 'weekly-update': "


def problems_with_second_source(entry: str) -> list[str]:
    text = config_text() + f'sources = [{{ kind = "file", path = "notes/*.md" }}, {entry}]\n'
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return caught.value.problems


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            '{ kind = "file", path = "../secrets/*" }',
            "sources[2].path: must be a path beside the config file (relative, without ..)",
        ),
        (
            '{ kind = "fed", url = "https://blog.example.com/feed.xml" }',
            'sources[2]: kind: want one of "feed", "github", "slack", "url", "file", got "fed"',
        ),
        (
            '{ url = "https://blog.example.com/feed.xml" }',
            "sources[2]: missing kind (what it reads: feed, github, slack, url, file)",
        ),
        ('{ kind = "feed" }', "sources[2].url: missing required field"),
        (
            '{ kind = "feed", url = "ftp://blog.example.com/feed.xml" }',
            'sources[2].url: want a URL that starts with http:// or https://, got "ftp://blog',
        ),
        (
            '{ kind = "github", repo = "widget" }',
            'sources[2].repo: want a repository as owner/name, like "acme/widget", got "widget"',
        ),
        (
            '{ kind = "github", repo = "acme/widget", items = ["releases", "tags"] }',
            "sources[2].items[2]: want 'releases' or 'merged_pulls', got \"tags\"",
        ),
        (
            '{ kind = "slack", channel = "#shipped" }',
            'sources[2].channel: want a channel ID like "C0SHIPPED"',
        ),
        (
            '{ kind = "url", url = "https://x.dev", max_items = 0 }',
            "sources[2].max_items: must be at least 1",
        ),
    ],
)
def test_a_bad_source_is_one_line_naming_the_recipe_the_source_and_the_key(
    entry: str, problem: str
) -> None:
    problems = problems_with_second_source(entry)

    assert len(problems) == 1, problems
    assert problems[0].startswith(RECIPE + problem), problems
    for machine_words in ("SourceKind", "<", ".feed.", ".1.", "should", "Input"):
        assert machine_words not in problems[0]


def test_an_unknown_key_in_a_source_lists_that_kinds_keys() -> None:
    problems = problems_with_second_source(
        '{ kind = "feed", url = "https://x.dev/feed", ur = "x" }'
    )

    assert problems == [
        RECIPE + "sources[2].ur: unknown key; did you mean 'url'? "
        "(valid keys: kind, max_items, name, required, secret_env, secret_header, url)"
    ]
