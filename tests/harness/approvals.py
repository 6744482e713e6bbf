"""A plain approval, for tests (and benchmarks) whose point is what follows it.

It goes through `core.review.queue.decide` like a click: a test of the decision itself (a
refusal, a stale revision, a reason) calls `decide` with its own arguments instead.
"""

from __future__ import annotations

from core.policies import Verdict
from core.ports import Clock
from core.review.queue import ReviewAnswer, decide
from core.setup.config import Config
from core.store.engine import Store


def approve(
    store: Store,
    config: Config,
    clock: Clock,
    key: str,
    *,
    user: str = "U0EDITOR",
    revision: int = 1,
) -> ReviewAnswer:
    """`key`'s `revision` approved by `user`, who may approve."""
    return decide(
        store,
        config,
        clock,
        draft_key=key,
        revision=revision,
        verdict=Verdict.APPROVED,
        user=user,
        permitted=True,
    )
