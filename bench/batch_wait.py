"""Time from a slot to its stored draft (the review message follows at the next outbox
pass, every 2 s): synchronous drafting against batch drafting, for batches the API ends
after 1 to 60 minutes (issue 24).

    .venv/bin/python -m bench.batch_wait [--slots 5] [--gather 30] [--ends 1,5,15,60]

Galley's real path in one process on a temporary SQLite database: the scheduler's
`draft_slot` for every due slot, then `BatchPass.run_once()` once a simulated second, as
`galley run` calls it every outbox pass. The fake Anthropic API (tests/fakes) holds each
batch until the simulated minute it is told to end it at; the clock is a `FrozenClock`
stepped by the loop, so the figures are the schedule Galley follows (gather, then polls
backing off from 5 s to 60 s), not this machine's speed. A synchronous draft's own time
is its model call: the fake answers at once here, the real API in seconds.
"""

from __future__ import annotations

import argparse
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlmodel import select

from core.api.services import Services
from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting.batch_drafter import BatchDrafter
from core.models import DraftRow
from core.setup.config import parse_config
from core.slots.schedule import slot_at_wall
from core.states import DraftState
from core.store.engine import Store
from core.testing import FrozenClock
from tests.fakes.anthropic_api import FakeAnthropic

SLOT = datetime(2026, 11, 23, 9, 0)
CONFIG = """
[slack]
review_channel = "C0REVIEW"

[defaults]
timezone = "UTC"
model = "claude-sonnet-5-5"
drafting = "batch"
batch_gather = "{gather}s"
batch_deadline = "2h"

{recipes}
"""
RECIPE = """
[[recipes]]
name = "update-{n}"
platform = "linkedin"
schedule = "0 9 * * mon"
prompt = "Write update {n} for {{slot:%d %B %Y}}."
"""


def minutes_to_ready(slots: int, gather: int, ends_after: int) -> list[float]:
    """Simulated minutes from the slot to each stored draft, batches ending `ends_after`
    minutes after their creation."""
    recipes = "".join(RECIPE.format(n=n) for n in range(slots))
    config = parse_config(CONFIG.format(gather=gather, recipes=recipes))
    start = SLOT.replace(tzinfo=UTC)
    clock = FrozenClock(start)
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic() as fake:
        fake.batches.now = lambda: clock.now().timestamp()
        fake.batches.hold = True
        store = Store(f"sqlite:///{Path(tmp) / 'bench.db'}")
        store.ensure_schema()
        services = Services(
            config,
            store,
            drafter=AnthropicDrafter("bench", fake.url),
            clock=clock,
            batch_client=BatchDrafter("bench", fake.url),
        )
        for recipe in config.recipes.values():
            services.drafting.draft_slot(recipe, slot_at_wall(recipe, SLOT))
        batches = services.batch_pass()
        assert batches is not None
        ready: dict[str, float] = {}
        while len(ready) < slots and clock.now() - start < timedelta(hours=3):
            clock.advance(timedelta(seconds=1))
            for batch in fake.batches.created:
                if clock.now().timestamp() - batch.created_at >= ends_after * 60:
                    fake.batches.release(batch.id)
            batches.run_once()
            with store.read() as session:
                for draft in session.exec(select(DraftRow)).all():
                    if draft.state == DraftState.READY and draft.key not in ready:
                        ready[draft.key] = (clock.now() - start).total_seconds() / 60
        store.dispose()
    return sorted(ready.values())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slots", type=int, default=5, help="batch recipes due at one slot")
    parser.add_argument("--gather", type=int, default=30, help="batch_gather, seconds")
    parser.add_argument("--ends", default="1,5,15,60", help="minutes the API takes per batch")
    args = parser.parse_args(argv)
    print(f"{args.slots} slots due at once, batch_gather {args.gather}s (simulated clock)")
    print(f"{'the API ends a batch after':>28} | slot to stored draft (minutes)")
    print(f"{'sync (the model call itself)':>28} | 0.0 + the call's own seconds")
    for minutes in (int(m) for m in args.ends.split(",")):
        times = minutes_to_ready(args.slots, args.gather, minutes)
        if len(times) < args.slots:
            raise SystemExit(f"only {len(times)} of {args.slots} drafts were stored")
        lag = times[-1] - args.gather / 60 - minutes
        print(
            f"{f'{minutes} min':>28} | {times[-1]:.2f} (gather + batch + {lag * 60:.0f}s poll lag)"
        )


if __name__ == "__main__":
    main()
