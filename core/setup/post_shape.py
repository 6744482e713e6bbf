"""The post-shape keys of a recipe (docs/design.md §30): `variants` and `thread`, checked
against the recipe's targets. Called by core/setup/config.py; never reads anything but
the recipe it is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.policies import Variants

if TYPE_CHECKING:
    from core.setup.config import Recipe

# Where a thread can be published: each platform's replies chain a part to the one before.
THREAD_PLATFORMS = frozenset({"bluesky", "mastodon", "slack"})
MAX_THREAD_PARTS = 25  # a bound on what the model is asked for and a reviewer reads


def post_shape_problems(recipe: Recipe) -> list[str]:
    """One line per problem with `variants` or `thread`, naming the key and the target."""
    problems: list[str] = []
    if recipe.variants is Variants.PER_TARGET and not recipe.targets:
        problems.append(
            'variants: "per_target" needs a publish target to write a version for: '
            'add `publish`, or use variants = "one"'
        )
    if recipe.thread > 1:
        problems.extend(
            f"thread: {target.target!r} cannot publish a thread: thread = "
            f"{recipe.thread} is allowed only when every target is "
            f"{', '.join(sorted(THREAD_PLATFORMS))}"
            for target in recipe.targets
            if target.to not in THREAD_PLATFORMS
        )
    return problems
