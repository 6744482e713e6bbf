"""Random concurrent operations against one real store, for the stress test.

A worker (a thread, or a process: `python -m tests.harness.stress CONFIG DB_URL SEED COUNT`)
draws operations from a seeded generator: draft, approve, reject, edit, bump, pause,
resume, cancel, retry, mark published / absent, sweep, reconcile, expire, settle
pending. Its model fails now and then (never sent, or sent and no answer), so runs fail,
retry and take over. Every operation may be refused; none may corrupt the store. The
invariants are checked by tests/operations/test_stress.py once every worker has stopped.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlmodel import col, select

from core.api.galley import Galley
from core.api.services import Services
from core.drafting.attempts import Backoff
from core.drafting.service import DraftingService, worker_name
from core.drafting.sweeper import sweep_expired_claims
from core.drafting_policies import AttemptOutcome
from core.errors import GalleyError, ModelCallFailed
from core.models import DraftRow, RunRow
from core.operations.alerts import AlertService
from core.policies import Finding, Verdict
from core.ports import DraftRequest, MessageRef, ModelReply, PostQuery, RunAlert, SystemClock
from core.publishing.platforms.webhook import WebhookPublisher
from core.publishing.service import PublishingService
from core.review.queue import decide, edit, expire_overdue_drafts
from core.scheduling.dispatch import SlotDispatcher
from core.setup.config import Config, load_config
from core.states import DraftState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store

RECIPE = "weekly-update"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SLOTS = [f"2026-{month:02d}-{day:02d}T09:00" for month, day in ((11, 2), (11, 9), (11, 16))]
SLOTS += ["2026-11-23T09:00", "2026-11-30T09:00", "2026-10-26T09:00"]
PEOPLE = ["U0EDITOR", "U0EDITOR2", "U0ADMIN"]


class FlakyDrafter:
    """Answers at once; one call in five fails (never sent, or sent and no answer)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def draft(self, request: DraftRequest) -> ModelReply:
        roll = self.rng.random()
        if roll < 0.1:
            raise ModelCallFailed(AttemptOutcome.NOT_SENT, "request never sent: refused")
        if roll < 0.2:
            raise ModelCallFailed(AttemptOutcome.OUTCOME_UNKNOWN, "request sent, no answer")
        text = f"draft {self.rng.randrange(10**6)}"
        return ModelReply(text, request.model, "req", "end_turn", 10, 20, 0, 0)


class QuietAlerter:
    def alert(self, alert: RunAlert) -> MessageRef:
        return MessageRef("C0ALERTS", alert.run_id)

    def settle(self, ref: MessageRef, alert: RunAlert) -> None:
        return None


@dataclass
class Worker:
    """One worker's services, built as a process of its own would build them."""

    config: Config
    store: Store
    rng: random.Random

    def __post_init__(self) -> None:
        clock = SystemClock()
        name = worker_name()
        drafter = FlakyDrafter(self.rng)
        self.services = Services(
            self.config,
            self.store,
            drafter=drafter,
            clock=clock,
            backoff=Backoff(base_seconds=0.01, cap_seconds=0.02),
        )
        self.galley = Galley.over(self.services)
        self.ledger = EffectLedger(self.store, clock, name)
        recipe = self.config.recipes[RECIPE]
        target = recipe.publish
        assert target is not None and hasattr(target, "url")
        self.publisher = WebhookPublisher(
            target.url,  # type: ignore[union-attr]
            target.status_url,  # type: ignore[union-attr]
            timeout=recipe.call_timeout,
        )
        self.publishing = PublishingService(
            self.store, self.config, clock, self.ledger, lambda _r: self.publisher
        )
        self.alerts = AlertService(
            self.store, self.config, clock, self.ledger, QuietAlerter(), recipe.review_window
        )
        service = DraftingService(self.store, drafter, clock=clock, worker=name)
        self.dispatcher = SlotDispatcher(
            self.store, service, clock, recipes=dict(self.config.recipes)
        )

    # --- picking something to act on ---

    def _pick(self, state: DraftState | None = None) -> DraftRow | None:
        with self.store.transaction() as session:
            query = select(DraftRow)
            if state is not None:
                query = query.where(col(DraftRow.state) == state)
            found = session.exec(query).all()
        return self.rng.choice(found) if found else None

    def _run(self, *states: RunState) -> str | None:
        with self.store.transaction() as session:
            found = session.exec(select(RunRow.id).where(col(RunRow.state).in_(states))).all()
        return self.rng.choice(found) if found else None

    # --- the operations ---

    def draft(self) -> None:
        self.galley.draft(RECIPE, self.rng.choice(SLOTS), actor="stress")

    def decide(self) -> None:
        draft = self._pick(DraftState.READY)
        if draft is None:
            return
        revision = draft.revision if self.rng.random() < 0.8 else draft.revision - 1
        verdict = Verdict.APPROVED if self.rng.random() < 0.7 else Verdict.REJECTED
        decide(
            self.store,
            self.config,
            self.services.clock,
            draft_key=draft.key,
            revision=revision,
            verdict=verdict,
            user=self.rng.choice(PEOPLE),
            permitted=True,
        )

    def edit(self) -> None:
        draft = self._pick(DraftState.READY)
        if draft is None:
            return
        edit(
            self.store,
            self.config,
            self.services.clock,
            draft_key=draft.key,
            revision=draft.revision,
            text=f"edited {self.rng.randrange(1000)}",
            user="U0EDITOR",
            permitted=True,
        )

    def bump(self) -> None:
        if self.rng.random() < 0.3:  # bumps are rare, as in life
            self.galley.bump(RECIPE, actor="U0ADMIN")

    def pause_or_resume(self) -> None:
        if self.rng.random() < 0.5:
            self.galley.pause(RECIPE, actor="U0ADMIN")
        else:
            self.galley.resume(RECIPE, actor="U0ADMIN")

    def cancel(self) -> None:
        run = self._run(RunState.AWAITING_REVIEW, RunState.APPROVED, RunState.UNCERTAIN)
        if run is not None and self.rng.random() < 0.3:
            self.galley.cancel(run, actor="U0ADMIN")

    def retry(self) -> None:
        run = self._run(RunState.FAILED, RunState.UNCERTAIN)
        if run is not None:
            self.galley.retry(run, actor="U0ADMIN")

    def resolve(self) -> None:
        """A person checks the destination, then says what they found."""
        run = self._run(RunState.UNCERTAIN)
        if run is None:
            return
        with self.store.transaction() as session:
            key = session.exec(select(RunRow.draft_key).where(col(RunRow.id) == run)).one()
        # the webhook looks up by key alone: no text, no time
        found = self.publisher.lookup(PostQuery(f"{key}|publish:webhook", "", EPOCH))
        finding = Finding.ABSENT if found is None else Finding.PUBLISHED
        self.galley.resolve(run, finding, actor="U0ADMIN")

    def sweep(self) -> None:
        for key in sweep_expired_claims(self.store, self.services.clock):
            self.dispatcher.settle_pending(key.split("|")[1])

    def reconcile(self) -> None:
        self.publishing.publish_pending()
        self.alerts.sweep()

    def expire(self) -> None:
        expire_overdue_drafts(self.store, self.config, self.services.clock)

    def settle_pending(self) -> None:
        run = self._run(RunState.PENDING)
        if run is not None:
            self.dispatcher.settle_pending(run)

    def operations(self) -> list[tuple[Callable[[], None], int]]:
        """Each operation with its weight."""
        return [
            (self.draft, 6),
            (self.decide, 5),
            (self.edit, 2),
            (self.bump, 1),
            (self.pause_or_resume, 1),
            (self.cancel, 1),
            (self.retry, 2),
            (self.resolve, 1),
            (self.sweep, 2),
            (self.reconcile, 4),
            (self.expire, 1),
            (self.settle_pending, 1),
        ]

    def work(self, count: int) -> int:
        """`count` random operations; returns how many were refused with a GalleyError
        (a refusal is a correct answer under concurrency, never a corruption)."""
        operations, weights = zip(*self.operations(), strict=True)
        refused = 0
        for _ in range(count):
            operation = self.rng.choices(operations, weights)[0]
            try:
                operation()
            except GalleyError:
                refused += 1
        self.publisher.close()
        return refused


def run_worker(config: Config, db_url: str, seed: int, count: int) -> int:
    store = Store(db_url)
    try:
        return Worker(config, store, random.Random(seed)).work(count)
    finally:
        store.dispose()


def main(argv: list[str]) -> None:
    config_path, db_url, seed, count = argv
    refused = run_worker(load_config(Path(config_path)), db_url, int(seed), int(count))
    sys.stdout.write(f"{refused}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
