"""Whether a recipe's system prompt is marked for the API's prompt cache, and how.

A marked prefix shorter than the model's minimum is simply not cached (no error, no
charge), so the estimate here errs long. A marker pays only when the same prefix comes
again within its TTL: on text sent once (a system prompt with `{slot}` in it) it costs
the write premium for nothing, which is why a batch marks only prompts its entries share.
"""

from __future__ import annotations

import math
from typing import Any

from core.drafting_policies import CacheTtl, Drafting

# The minimum cacheable prompt length in tokens, by model id fragment, first match wins,
# as Anthropic's prompt-caching page lists it, recorded 2026-12-02. Models not listed get
# DEFAULT_MIN_TOKENS, the lowest current minimum: an unneeded marker costs nothing.
MIN_CACHEABLE_TOKENS = (
    ("opus-4-5", 4096),
    ("opus-4-6", 4096),
    ("haiku-4-5", 4096),
    ("3-5-haiku", 2048),
    ("3-haiku", 2048),
)
DEFAULT_MIN_TOKENS = 1024
# English runs near 4 characters a token; 3 counts more tokens than there are, so a
# prompt near the minimum is marked rather than missed.
CHARS_PER_TOKEN = 3
SYNC_TTL = Drafting.SYNC.cache_ttl
BATCH_TTL = Drafting.BATCH.cache_ttl


def min_cacheable_tokens(model: str) -> int:
    name = model.lower()
    return next((n for part, n in MIN_CACHEABLE_TOKENS if part in name), DEFAULT_MIN_TOKENS)


def long_enough(system: str, model: str) -> bool:
    """Whether `system` may reach the model's minimum cacheable length."""
    return math.ceil(len(system) / CHARS_PER_TOKEN) >= min_cacheable_tokens(model)


def system_param(system: str, model: str, ttl: CacheTtl | None) -> str | list[dict[str, Any]]:
    """The request's `system` field: one text block marked with `cache_control` when `ttl`
    is given and the prompt is long enough to be cached, else the plain text. The 5-minute
    TTL is the API's default and is left unsaid."""
    if ttl is None or not long_enough(system, model):
        return system
    control: dict[str, str] = {"type": "ephemeral"}
    if ttl is not CacheTtl.FIVE_MINUTES:
        control["ttl"] = ttl.value
    return [{"type": "text", "text": system, "cache_control": control}]
