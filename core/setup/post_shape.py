"""The post-shape keys of a recipe (docs/design.md §30): `variants` and `thread`, checked
against the recipe's targets. Called by core/setup/config.py with the values it parsed;
imports nothing of it, so the config module has no cycle through here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from core.drafting_policies import Variants


class Target(Protocol):
    """What a publish target says of itself here: its platform and its id."""

    @property
    def to(self) -> str: ...

    @property
    def target(self) -> str: ...


# Where a thread can be published: each platform's replies chain a part to the one before.
THREAD_PLATFORMS = frozenset({"bluesky", "discord", "mastodon", "slack", "telegram", "threads"})
MAX_THREAD_PARTS = 25  # a bound on what the model is asked for and a reviewer reads


def post_shape_problems(variants: Variants, thread: int, targets: Sequence[Target]) -> list[str]:
    """One line per problem with `variants` or `thread`, naming the key and the target."""
    problems: list[str] = []
    if variants is Variants.PER_TARGET and not targets:
        problems.append(
            'variants: "per_target" needs a publish target to write a version for: '
            'add `publish`, or use variants = "one"'
        )
    if thread > 1:
        problems.extend(
            f"thread: {target.target!r} cannot publish a thread: thread = "
            f"{thread} is allowed only when every target is "
            f"{', '.join(sorted(THREAD_PLATFORMS))}"
            for target in targets
            if target.to not in THREAD_PLATFORMS
        )
    return problems
