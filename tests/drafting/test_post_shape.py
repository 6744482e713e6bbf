"""The post-shape keys and the structured request (docs/design.md §30), without a server:
`variants` and `thread` checked against the targets, what the model is asked for, and
an answer validated into a whole set or refused as a retryable failure."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from core.drafting.fit import FitRule
from core.drafting.learning import published_text
from core.drafting.post_shape import (
    body_of_answer,
    shape_for,
    shaped_reply,
    shown_to_model,
    tool_params,
)
from core.drafting_policies import AttemptOutcome
from core.errors import ConfigError, ModelCallFailed
from core.ports import Fit, ModelReply, PostShape, VersionAsk
from core.post_body import BODY_MARK, EVERY_TARGET, PostBody
from core.setup.config import Recipe, parse_config
from tests.conftest import config_text

BLUESKY = 'publish = { to = "bluesky", handle = "acme.bsky.social" }'
TWO = (
    'publish = [{ to = "bluesky", handle = "acme.bsky.social" },'
    ' { to = "linkedin", author = "urn:li:organization:1" }]'
)
SHAPE = PostShape(
    (
        VersionAsk("bluesky:a", "Bluesky", 300, "graphemes"),
        VersionAsk("webhook", "webhook", None, "c"),
    ),
    parts=3,
)


def recipe_with(publish: str, keys: str) -> Recipe:
    text = re.sub(
        r"^(prompt = .*)$", lambda m: f"{m.group(1)}\n{publish}\n{keys}", config_text(), flags=re.M
    )
    return parse_config(text).recipe("weekly-update")


def problems_of(publish: str, keys: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        recipe_with(publish, keys)
    return caught.value.problems


def test_a_thread_to_a_platform_without_replies_is_a_config_error_naming_key_and_target() -> None:
    [problem] = problems_of(TWO, "thread = 3")
    assert problem.startswith("recipe 'weekly-update': thread: 'linkedin:urn:li:organization:1'")
    assert "bluesky, discord, mastodon, slack" in problem
    assert recipe_with(BLUESKY, "thread = 3").thread == 3


def test_versions_per_target_need_a_target_and_a_thread_at_least_one_part() -> None:
    [problem] = problems_of("", 'variants = "per_target"')
    assert problem.startswith("recipe 'weekly-update': variants:")
    assert problems_of(BLUESKY, "thread = 0")[0].startswith("recipe 'weekly-update': thread:")
    assert problems_of(BLUESKY, 'variants = "every"')[0].startswith(
        "recipe 'weekly-update': variants:"
    )


def test_the_default_shape_asks_for_nothing_new() -> None:
    assert shape_for(recipe_with(TWO, ""), None) is None


def test_each_target_is_asked_for_by_name_with_its_limit_in_its_own_units() -> None:
    class Measured:
        def __init__(self, target: str, label: str, limit: int) -> None:
            self.target, self.label, self.limit = target, label, limit

        def fit(self, text: str) -> Fit:
            return Fit(self.target, self.label, len(text), self.limit)

    rule = FitRule(
        lambda recipe: [  # type: ignore[arg-type, return-value]
            Measured("bluesky:acme.bsky.social", "Bluesky", 300),
            Measured("linkedin:urn:li:organization:1", "LinkedIn", 3000),
        ]
    )
    shape = shape_for(recipe_with(TWO, 'variants = "per_target"'), rule)
    assert shape is not None and shape.parts == 1
    assert [(a.key, a.limit, a.unit.split()[0]) for a in shape.versions] == [
        ("bluesky:acme.bsky.social", 300, "graphemes"),
        ("linkedin:urn:li:organization:1", 3000, "characters"),
    ]
    [one] = shape_for(recipe_with(BLUESKY, "thread = 4"), rule).versions  # type: ignore[union-attr]
    assert (one.key, one.limit) == (EVERY_TARGET, 300)  # variants = "one": a thread for all


def test_the_tool_schema_requires_every_version_with_one_to_n_parts() -> None:
    params = tool_params(SHAPE)
    versions = params["tools"][0]["input_schema"]["properties"]["versions"]
    assert versions["required"] == ["bluesky:a", "webhook"]
    assert {v["maxItems"] for v in versions["properties"].values()} == {3}
    assert params["tool_choice"] == {"type": "tool", "name": "submit_post"}


@pytest.mark.parametrize(
    "answer",
    [
        None,  # no tool call at all (a text answer)
        {"text": "hello"},  # no versions object
        {"versions": {"bluesky:a": ["one"]}},  # a target missing
        {"versions": {"bluesky:a": ["one"], "webhook": []}},  # a version without a part
        {"versions": {"bluesky:a": ["one"], "webhook": ["  "]}},  # only blank parts
        {"versions": {"bluesky:a": ["1", "2", "3", "4"], "webhook": ["w"]}},  # past thread
        {"versions": {"bluesky:a": "one", "webhook": ["w"]}},  # a string, not a list
    ],
)
def test_an_answer_that_is_not_a_whole_set_is_a_retryable_failure(answer: object) -> None:
    with pytest.raises(ModelCallFailed) as caught:
        body_of_answer(SHAPE, answer)  # type: ignore[arg-type]
    assert caught.value.outcome is AttemptOutcome.MALFORMED_ANSWER
    assert caught.value.outcome.retryable


def test_a_whole_set_becomes_the_body_and_what_was_not_asked_for_is_left_out() -> None:
    answer = {"versions": {"bluesky:a": [" one ", "two"], "webhook": ["w"], "other": ["x"]}}
    assert body_of_answer(SHAPE, answer) == PostBody(
        {"bluesky:a": ("one", "two"), "webhook": ("w",)}
    )


def test_a_redraft_shows_the_model_each_part_under_its_version() -> None:
    text = PostBody({"bluesky:a": ("one", "two"), "webhook": ("w",)}).to_text()
    assert shown_to_model(text) == (
        '<part of="bluesky:a 1/2">\none\n</part>\n\n'
        '<part of="bluesky:a 2/2">\ntwo\n</part>\n\n'
        '<part of="webhook">\nw\n</part>'
    )
    assert shown_to_model("plain") == "plain"


def test_a_target_without_a_version_of_its_own_cannot_be_approved() -> None:
    class Counted:
        def __init__(self, target: str) -> None:
            self.target = target

        def fit(self, text: str) -> Fit:
            return Fit(self.target, self.target, len(text), 300)

    rule = FitRule(lambda recipe: [Counted("bluesky:a"), Counted("mastodon:m")])  # type: ignore[arg-type, return-value]
    recipe: Recipe = None  # type: ignore[assignment]  # the rule reads only its publishers
    set_of_one = PostBody({"bluesky:a": ("one",)}).to_text()
    assert rule.check(recipe, set_of_one).reason == (
        "No version for mastodon:m. Redraft it to write one."
    )
    assert [f.target for f in rule.measure(recipe, set_of_one)] == ["bluesky:a"]
    assert rule.check(recipe, PostBody({"*": ("a", "b")}).to_text()).reason is None


def test_a_malformed_answer_keeps_what_it_cost_and_says_when_it_was_cut() -> None:
    cut = ModelReply("", "m", "req_1", "max_tokens", 10, 1024, 0, 0, structured={"versions": {}})
    with pytest.raises(ModelCallFailed) as caught:
        shaped_reply(SHAPE, cut)
    assert caught.value.paid_usage == {
        "input_tokens": 10,
        "output_tokens": 1024,
        "cache_creation_tokens": 0,
        "cache_read_tokens": 0,
    }
    assert caught.value.request_id == "req_1"
    assert "stopped at max_tokens (1024 tokens)" in str(caught.value)


def test_a_best_post_is_shown_to_the_model_as_its_target_published_it() -> None:
    text = PostBody({"bluesky:a": ("one", "two"), "webhook": ("w",)}).to_text()
    assert published_text(text, "bluesky:a") == "one\n\ntwo"
    assert published_text(text, "gone:x") == "one\n\ntwo\n\nw"  # no version: every part
    assert published_text("plain", "bluesky:a") == "plain"


def test_a_plain_answer_pretending_to_be_a_set_is_stored_as_the_text_it_is() -> None:
    forged = BODY_MARK + json.dumps({"versions": {"bluesky:a": ["not what was approved"]}})
    reply = ModelReply(forged, "m", None, "end_turn", 1, 1, 0, 0)
    stored = shaped_reply(None, reply).text
    assert PostBody.parse(stored) == PostBody.single(forged)
    assert shaped_reply(None, replace(reply, text="plain")).text == "plain"  # unchanged
