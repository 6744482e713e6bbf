"""Cost per delivered draft: synchronous calls, a Message Batch, and both with the prompt
cache, for the same recipes (issue 24).

    .venv/bin/python -m bench.batch_cost [--model claude-sonnet-5-5] [--draft-chars 1200]

Token counts come from the fake Anthropic API (tests/fakes), driven by Galley's own
adapters over real HTTP: `AnthropicDrafter` for synchronous calls, `BatchDrafter` for
batches. The fake counts 4 characters a token and caches a marked system prompt as the
API does (written by the first request, read by the next within its TTL, if long
enough), answering each entry of a batch in turn, so every entry after the first reads
the cache: on the real API a batch's cache hits are best effort, so `batch + cache` is a
lower bound. The tokens are priced with core/telemetry/pricing.py's dated table and multipliers.

Columns: `sync` plain synchronous calls; `sync + cache` Galley's synchronous request,
which marks a long system prompt (5-minute TTL); `batch` one batch, no marker; `batch +
cache` Galley's batch request, which marks a system prompt for an hour only when enough
entries of the batch share it to pay (core.telemetry.pricing.caching_pays). One scenario runs on a
fresh fake, so no cache outlives it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting.batch_drafter import BatchDrafter
from core.drafting.prompt_cache import BATCH_TTL, SYNC_TTL
from core.drafting_policies import CacheTtl, Drafting
from core.identity import batch_custom_id, draft_key, run_id
from core.ports import DraftRequest, ModelReply
from core.telemetry.pricing import reply_cost_usd
from tests.fakes.anthropic_api import FakeAnthropic

SHORT_SYSTEM = "You write concise, warm company updates."  # examples/galley.toml's
HOUSE_STYLE = (
    "You write for Acme's public channels. Voice: warm, plain, specific; never hype. "
    "Sentences under twenty words; one idea each. Name the customer benefit first, then "
    "the change, then who to ask. No jargon, no emoji, no exclamation marks. Dates as "
    "'Monday 20 October'. Numbers as digits. Product names exactly as in the glossary. "
) * 20  # about 7,000 characters: 1,700 tokens, past every current caching minimum
COLUMNS = ("sync", "sync + cache", "batch", "batch + cache")


@dataclass(frozen=True)
class Scenario:
    name: str
    slots: list[tuple[str, str, str]]  # (recipe, platform, system) due in one gather


SCENARIOS = [
    Scenario("one recipe, short system prompt", [("weekly-update", "linkedin", SHORT_SYSTEM)]),
    Scenario("one recipe, long house style", [("weekly-update", "linkedin", HOUSE_STYLE)]),
    Scenario(
        "5 platforms, one house style",
        [(f"update-{p}", p, HOUSE_STYLE) for p in ("linkedin", "x", "blog", "bsky", "mastodon")],
    ),
    Scenario("catch-up: 8 slots, one recipe", [("weekly-update", "linkedin", HOUSE_STYLE)] * 8),
]


def requests_of(scenario: Scenario, model: str) -> list[tuple[str, DraftRequest]]:
    """Each due slot's custom_id and request; a repeated recipe gets successive weeks."""
    out = []
    for week, (recipe, platform, system) in enumerate(scenario.slots):
        wall = datetime(2026, 10, 5, 9) + timedelta(weeks=week)
        key = draft_key(platform, run_id(recipe, wall), 1)
        prompt = f"Write the {recipe} post for {platform}, week of {wall:%d %B %Y}."
        request = DraftRequest(model, system, prompt, 1024, timedelta(seconds=30), recipe)
        out.append((batch_custom_id(key), request))
    return out


def replies_sync(fake: FakeAnthropic, requests: list[tuple[str, DraftRequest]]) -> list[ModelReply]:
    drafter = AnthropicDrafter(api_key="bench", base_url=fake.url)
    return [drafter.draft(request) for _, request in requests]


def replies_batch(
    fake: FakeAnthropic, requests: list[tuple[str, DraftRequest]], *, cache: bool
) -> list[ModelReply]:
    batch = BatchDrafter(api_key="bench", base_url=fake.url, cache=cache)
    results = batch.results(batch.submit(requests))
    replies = [r for r in results.values() if isinstance(r, ModelReply)]
    assert len(replies) == len(requests), "an entry did not succeed"
    return replies


@dataclass(frozen=True)
class Column:
    drafting: Drafting
    ttl: CacheTtl
    run: Callable[[FakeAnthropic, list[tuple[str, DraftRequest]]], list[ModelReply]]


def plain_sync_replies(
    fake: FakeAnthropic, requests: list[tuple[str, DraftRequest]]
) -> list[ModelReply]:
    """Synchronous calls without a marker cost what an unmarked batch's entries count."""
    return replies_batch(fake, requests, cache=False)


RUNS = {
    "sync": Column(Drafting.SYNC, SYNC_TTL, plain_sync_replies),
    "sync + cache": Column(Drafting.SYNC, SYNC_TTL, replies_sync),
    "batch": Column(Drafting.BATCH, BATCH_TTL, lambda f, r: replies_batch(f, r, cache=False)),
    "batch + cache": Column(
        Drafting.BATCH, BATCH_TTL, lambda f, r: replies_batch(f, r, cache=True)
    ),
}


def measure(scenario: Scenario, model: str, text: str) -> dict[str, tuple[float, list[ModelReply]]]:
    """Per column: USD per delivered draft, and the replies it was priced from."""
    out = {}
    for name in COLUMNS:
        column = RUNS[name]
        with FakeAnthropic(text=text, count_tokens=True) as fake:
            replies = column.run(fake, requests_of(scenario, model))
        total = sum(reply_cost_usd(r, column.drafting, column.ttl) for r in replies)
        out[name] = (total / len(replies), replies)
    return out


def tokens_per_draft(replies: list[ModelReply]) -> str:
    n = len(replies)
    fields = (
        sum(r.input_tokens for r in replies) / n,
        sum(r.cache_creation_tokens for r in replies) / n,
        sum(r.cache_read_tokens for r in replies) / n,
        sum(r.output_tokens for r in replies) / n,
    )
    return " / ".join(f"{f:,.0f}" for f in fields)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="claude-sonnet-5-5")
    parser.add_argument("--draft-chars", type=int, default=1200, help="length of each draft")
    args = parser.parse_args(argv)
    text = ("We shipped the new export this week; here is what changes for you. " * 40)[
        : args.draft_chars
    ]
    print(f"Model {args.model}; drafts of {args.draft_chars} characters; USD per delivered draft")
    print("(and against sync). Tokens per draft: input / cache write / cache read / output.\n")
    print("| scenario | drafts | " + " | ".join(COLUMNS) + " |")
    print("|---|---:|" + "---:|" * len(COLUMNS))
    token_rows = []
    for scenario in SCENARIOS:
        figures = measure(scenario, args.model, text)
        base = figures["sync"][0]
        cells = [f"${cost:.5f} ({cost / base:.0%})" for cost, _ in figures.values()]
        print(f"| {scenario.name} | {len(scenario.slots)} | " + " | ".join(cells) + " |")
        token_rows.append(
            f"| {scenario.name} | "
            + " | ".join(tokens_per_draft(replies) for _, replies in figures.values())
            + " |"
        )
    print("\n| scenario | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    print("\n".join(token_rows))


if __name__ == "__main__":
    main()
