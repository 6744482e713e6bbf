"""When a run is stuck (docs/design.md §12): drafting or publishing far past its deadline,
with nothing moving it, so people must be told. The one rule behind every surface that
says "stuck" (the alert sweep, the Home tab, the daily digest, the `galley_runs_stuck`
gauge), as a predicate over a run and as a SQL condition, both from `stuck_after`.
No threshold is spelled anywhere else.

Why these thresholds. A drafting run is bounded by its claim: `claim_lease` covers one
claim's whole drafting, retries included, and a dead holder is taken over or swept
within seconds; a run still `running` after two leases has outlived its claim and a
take-over. A batch recipe's run also waits up to `batch_deadline` for its batch before
its synchronous fallback, so its bound adds that wait (`galley draft --batch` on a sync
recipe is judged as sync: it may be called stuck while its batch still runs).
Publishing is not bounded by the claim at all: each call to a destination is
bounded by `call_timeout` (past it the outcome is unknown and the run goes `uncertain`),
and a publication is a look-up, one send and a few rate-limit waits, so ten call timeouts
is far past any publication that is still moving. The digest once judged publishing runs
by two claim leases too (20 minutes with the defaults, against the alert's 5): the alert's
thresholds are the ones people are paged by, and now every surface uses them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

import sqlalchemy as sa
from sqlmodel import col

from core.drafting_policies import Drafting
from core.models import RunRow
from core.setup.config import Config, Recipe
from core.states import RUN_WORKING_STATES, RunState

STUCK_RUNNING_LEASES = 2  # drafting for two claim leases
STUCK_PUBLISHING_CALLS = 10  # publishing for ten call timeouts


class RunTiming(Protocol):
    """What the rule reads of a run (a `RunRow` has it)."""

    @property
    def recipe(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def updated_at(self) -> datetime: ...  # when it entered its state


def stuck_after(recipe: Recipe, state: str) -> timedelta | None:
    """How long a run of `recipe` may stay in `state` before it is stuck; None for a state
    no run is ever stuck in (it waits on people, or is over)."""
    if state == RunState.RUNNING:
        waits = recipe.batch_deadline if recipe.drafting == Drafting.BATCH else timedelta(0)
        return waits + recipe.claim_lease * STUCK_RUNNING_LEASES
    if state == RunState.PUBLISHING:
        return recipe.call_timeout * STUCK_PUBLISHING_CALLS
    return None


def is_stuck(run: RunTiming, config: Config, now: datetime) -> bool:
    """Whether `run` is stuck at `now`. A run whose recipe left the config is judged by
    nothing here: the alert sweep tells it as stranded, the sweeper returns its claim."""
    recipe = config.recipes.get(run.recipe)
    limit = None if recipe is None else stuck_after(recipe, run.state)
    return limit is not None and now - run.updated_at > limit


def stuck_condition(config: Config, now: datetime) -> sa.ColumnElement[bool]:
    """`is_stuck` as a WHERE condition on `runs`: one (recipe, state, updated_at) test per
    recipe and working state, each answered by ix_runs_state_updated."""
    tests = []
    for name, recipe in config.recipes.items():
        for state in sorted(RUN_WORKING_STATES):
            limit = stuck_after(recipe, state)
            if limit is not None:
                tests.append(
                    (col(RunRow.state) == state)
                    & (col(RunRow.recipe) == name)
                    & (col(RunRow.updated_at) < now - limit)
                )
    return sa.or_(sa.false(), *tests)
