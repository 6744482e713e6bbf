"""Estimated cost at sync, batch and cached prices, and when a cache marker pays."""

from __future__ import annotations

import pytest

from core.drafting.prompt_cache import min_cacheable_tokens, system_param
from core.drafting_policies import CacheTtl, Drafting
from core.ports import ModelReply
from core.telemetry.pricing import caching_pays, estimated_cost_usd, reply_cost_usd


def reply(
    model: str = "claude-sonnet-5-5",
    input_tokens: int = 1_000_000,
    output_tokens: int = 0,
    created: int = 0,
    read: int = 0,
) -> ModelReply:
    return ModelReply("t", model, None, "end_turn", input_tokens, output_tokens, created, read)


def test_sync_prices_are_the_list_prices_of_the_family() -> None:
    assert reply_cost_usd(reply()) == pytest.approx(3.0)
    assert reply_cost_usd(reply(input_tokens=0, output_tokens=1_000_000)) == pytest.approx(15.0)
    assert reply_cost_usd(reply("claude-haiku-4-5")) == pytest.approx(1.0)


def test_a_batch_halves_every_token_cache_included() -> None:
    full = reply(input_tokens=1000, output_tokens=500, created=2000, read=3000)
    sync = reply_cost_usd(full, Drafting.SYNC, CacheTtl.ONE_HOUR)
    assert reply_cost_usd(full, Drafting.BATCH, CacheTtl.ONE_HOUR) == pytest.approx(sync / 2)


@pytest.mark.parametrize(
    ("ttl", "write"), [(CacheTtl.FIVE_MINUTES, 3.75), (CacheTtl.ONE_HOUR, 6.0)]
)
def test_cache_writes_cost_by_ttl_and_reads_a_tenth(ttl: CacheTtl, write: float) -> None:
    assert reply_cost_usd(reply(input_tokens=0, created=1_000_000), cache_ttl=ttl) == (
        pytest.approx(write)
    )
    assert reply_cost_usd(reply(input_tokens=0, read=1_000_000), cache_ttl=ttl) == (
        pytest.approx(0.3)
    )


def test_the_old_signature_still_prices_a_5_minute_cache_write() -> None:
    assert estimated_cost_usd("claude-sonnet-5-5", 0, 0, 1_000_000, 0) == pytest.approx(3.75)


@pytest.mark.parametrize(
    ("uses", "ttl", "pays"),
    [
        (1, CacheTtl.FIVE_MINUTES, False),
        (2, CacheTtl.FIVE_MINUTES, True),
        (1, CacheTtl.ONE_HOUR, False),
        (2, CacheTtl.ONE_HOUR, False),
        (3, CacheTtl.ONE_HOUR, True),
    ],
)
def test_a_cache_marker_pays_once_enough_requests_share_the_prefix(
    uses: int, ttl: CacheTtl, pays: bool
) -> None:
    assert caching_pays(uses, ttl) is pays


def test_the_minimum_cacheable_length_depends_on_the_model() -> None:
    assert min_cacheable_tokens("claude-haiku-4-5-20251001") == 4096
    assert min_cacheable_tokens("claude-3-5-haiku-20241022") == 2048
    assert min_cacheable_tokens("claude-sonnet-5-5") == 1024


def test_a_long_system_prompt_is_marked_and_a_short_one_is_sent_as_text() -> None:
    long_prompt = "x" * 3 * 1024
    assert system_param("Be brief.", "claude-sonnet-5-5", CacheTtl.FIVE_MINUTES) == "Be brief."
    assert system_param(long_prompt, "claude-haiku-4-5", CacheTtl.FIVE_MINUTES) == long_prompt
    assert system_param(long_prompt, "claude-sonnet-5-5", None) == long_prompt
    assert system_param(long_prompt, "claude-sonnet-5-5", CacheTtl.FIVE_MINUTES) == [
        {"type": "text", "text": long_prompt, "cache_control": {"type": "ephemeral"}}
    ]
    assert system_param(long_prompt, "claude-sonnet-5-5", CacheTtl.ONE_HOUR) == [
        {"type": "text", "text": long_prompt, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
