"""Estimated model cost, for people reading the ledger: never used to decide anything.

Prices are US dollars per million tokens by model family, as Anthropic lists them for
the current generation; cache writes cost 1.25 x input, cache reads 0.1 x input. A model
whose family is unknown is priced as Sonnet, so an estimate is never silently zero.
"""

from __future__ import annotations

from dataclasses import dataclass

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens


PRICES = {
    "opus": Price(5.0, 25.0),
    "sonnet": Price(3.0, 15.0),
    "haiku": Price(1.0, 5.0),
}
DEFAULT_PRICE = PRICES["sonnet"]


def price_of(model: str | None) -> Price:
    name = (model or "").lower()
    return next((p for family, p in PRICES.items() if family in name), DEFAULT_PRICE)


def estimated_cost_usd(
    model: str | None,
    input_tokens: int,
    output_tokens: int,
    cache_creation_tokens: int = 0,
    cache_read_tokens: int = 0,
) -> float:
    price = price_of(model)
    billed_input = input_tokens + 1.25 * cache_creation_tokens + 0.1 * cache_read_tokens
    return (billed_input * price.input + output_tokens * price.output) / PER_MILLION
