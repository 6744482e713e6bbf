"""Estimated model cost, for people reading the ledger: never used to decide anything.

Prices are US dollars per million tokens by model family, as Anthropic lists them for
the current generation. A model whose family is unknown is priced as Sonnet, so an
estimate is never silently zero. Batches and prompt caching change every price by a
fixed multiplier, kept here beside the table they multiply.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.drafting_policies import CacheTtl, Drafting
from core.ports import ModelReply

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens


# USD per million tokens by family, as recorded when this table was written: re-check
# against Anthropic's pricing page when a family moves.
PRICES = {
    "opus": Price(5.0, 25.0),
    "sonnet": Price(3.0, 15.0),
    "haiku": Price(1.0, 5.0),
}
DEFAULT_PRICE = PRICES["sonnet"]
# Multipliers as Anthropic's pricing and prompt-caching pages list them, recorded
# 2026-12-02: a batch bills every token at half price, cache writes and reads included;
# a cache write costs 1.25 input tokens with the 5-minute TTL and 2 with the 1-hour one;
# a cache read 0.1, whichever TTL wrote it (a few newer models list less: an estimate
# here errs high, never low).
BATCH_DISCOUNT = {Drafting.SYNC: 1.0, Drafting.BATCH: 0.5}
CACHE_WRITE = {CacheTtl.FIVE_MINUTES: 1.25, CacheTtl.ONE_HOUR: 2.0}
CACHE_READ = 0.1


def price_of(model: str | None) -> Price:
    name = (model or "").lower()
    return next((p for family, p in PRICES.items() if family in name), DEFAULT_PRICE)


def estimated_cost_usd(
    model: str | None,
    input_tokens: int,
    output_tokens: int,
    cache_creation_tokens: int = 0,
    cache_read_tokens: int = 0,
    *,
    drafting: Drafting | str = Drafting.SYNC,
    cache_ttl: CacheTtl | None = None,
) -> float:
    """One call's tokens at list prices: `input_tokens` are the uncached ones, as the API
    counts them; `drafting` is how it was called (an attempt row's `mode`); `cache_ttl`
    is the TTL the cache writes were made with (by default, the one Galley marks for
    that way of calling)."""
    drafting = Drafting(drafting)
    cache_ttl = cache_ttl or drafting.cache_ttl
    price = price_of(model)
    billed_input = (
        input_tokens
        + CACHE_WRITE[cache_ttl] * cache_creation_tokens
        + CACHE_READ * cache_read_tokens
    )
    full = (billed_input * price.input + output_tokens * price.output) / PER_MILLION
    return full * BATCH_DISCOUNT[drafting]


def reply_cost_usd(
    reply: ModelReply,
    drafting: Drafting = Drafting.SYNC,
    cache_ttl: CacheTtl = CacheTtl.FIVE_MINUTES,
) -> float:
    """What one reply cost: synchronously or in a batch, its cache writes at `cache_ttl`."""
    return estimated_cost_usd(
        reply.model,
        reply.input_tokens,
        reply.output_tokens,
        reply.cache_creation_tokens,
        reply.cache_read_tokens,
        drafting=drafting,
        cache_ttl=cache_ttl,
    )


def caching_pays(uses: int, ttl: CacheTtl) -> bool:
    """Whether marking a prefix that `uses` requests share costs less than not marking it,
    if one request writes the cache and the others read it: 1.25 + 0.1 (uses - 1) < uses
    from 2 uses at the 5-minute TTL, 2 + 0.1 (uses - 1) < uses from 3 at the 1-hour one.
    The batch discount multiplies both sides alike, so it does not move the threshold."""
    return CACHE_WRITE[ttl] + CACHE_READ * (uses - 1) < uses
