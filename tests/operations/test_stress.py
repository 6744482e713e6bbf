"""Random concurrent operations, then the invariants (docs/design.md §3-§12, §20).

Threads and processes draw seeded operations (draft, approve, reject, edit, bump,
pause, resume, cancel, retry, resolve, sweep, reconcile, expire, settle pending)
against one real store with short leases and a model that fails one call in five.
Then the system is left to settle, and these must hold:

- at most one publication per effect key (the webhook received each key once), though
  the webhook's reads lag its writes: a publication is visible to a look-up only
  `HOLD` seconds after it arrived, so a take-over during a send does not find it;
- no published draft that is superseded, rejected or expired;
- no run in a state that nothing will move, without a live claim, a receipt in flight
  or people told (an alert);
- every event chain replays to the stored state (each event leaves the state the
  previous one entered): no write landed over a state it did not read.

Seeded and reproducible per worker (the interleaving between workers is not: that is
the point); GALLEY_STRESS_OPERATIONS sets the count per worker and GALLEY_STRESS_SEED
the seed, to explore other histories.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import col, select

from core.models import DraftRow, EffectRow, EventRow, RunRow
from core.setup.config import Config, parse_config
from core.states import DraftState, EffectState, RunState
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.webhook import FakeWebhook, accept_then_hang
from tests.harness import stress
from tests.harness.timing import scaled

pytestmark = pytest.mark.slow
OPERATIONS = int(os.environ.get("GALLEY_STRESS_OPERATIONS", "150"))
THREADS, PROCESSES = 3, 2
SEED = int(os.environ.get("GALLEY_STRESS_SEED", "20261201"))
HOLD = 0.6  # under call_timeout (1 s): the look-up a taker waits `on_wire` for must see it


@pytest.fixture
def hook() -> Iterator[FakeWebhook]:
    fake = FakeWebhook(hold_visibility=HOLD).start()
    yield fake
    fake.stop()


def stress_config(hook: FakeWebhook) -> str:
    publish = (
        f'publish = {{ to = "webhook", url = "{hook.hook_url}", status_url = "{hook.status_url}" }}'
    )
    text = config_text(
        pending_limit=4,
        claim_lease="20s",
        model_timeout="5s",
        max_attempts=2,
        heartbeat="1s",
        takeover_after="2s",
    )
    text = text.replace('prompt = "Write', f'{publish}\nprompt = "Write')
    extra = 'call_timeout = "1s"\nreview_window = "8s"\napproval_ttl = "1h"\nmisfire_grace = "520w"'
    return text.replace("[defaults]\n", f"[defaults]\n{extra}\n")


def start_process(config_path: Path, db_url: str, seed: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.harness.stress",
            str(config_path),
            db_url,
            str(seed),
            str(OPERATIONS),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def settle(config: Config, store: Store) -> None:
    """Everyone has stopped: let leases lapse, then let the passes run until quiet."""
    time.sleep(2.5)  # takeover_after: every claim and receipt still held is now dead
    worker = stress.Worker(config, store, random.Random(SEED))
    for _ in range(6):
        worker.sweep()
        for run_id in stale_pending(store):
            worker.dispatcher.settle_pending(run_id)
        worker.reconcile()
        time.sleep(0.3)
    worker.publisher.close()


def stale_pending(store: Store) -> list[str]:
    with store.transaction() as session:
        return list(
            session.exec(select(RunRow.id).where(col(RunRow.state) == RunState.PENDING)).all()
        )


def test_random_concurrent_operations_keep_every_invariant(
    db_url: str, tmp_path: Path, hook: FakeWebhook
) -> None:
    text = stress_config(hook)
    config_path = tmp_path / "galley.toml"
    config_path.write_text(text)
    config = parse_config(text)
    hook.script_post(*[accept_then_hang(2)] * 3)  # three sends whose answers never come
    processes = [start_process(config_path, db_url, SEED + 100 + i) for i in range(PROCESSES)]
    refusals: list[int] = []
    threads = [
        threading.Thread(
            target=lambda seed=SEED + i: refusals.append(
                stress.run_worker(config, db_url, seed, OPERATIONS)
            )
        )
        for i in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    for process in processes:
        _, err = process.communicate(timeout=scaled(600))
        assert process.returncode == 0, err[-3000:]
    assert len(refusals) == THREADS

    store = Store(db_url)
    try:
        settle(config, store)
        check_invariants(store, hook)
    finally:
        store.dispose()


def check_invariants(store: Store, hook: FakeWebhook) -> None:
    with store.transaction() as session:
        runs = list(session.exec(select(RunRow)).all())
        drafts = {d.key: d for d in session.exec(select(DraftRow)).all()}
        effects = {e.key: e for e in session.exec(select(EffectRow)).all()}
        events = list(session.exec(select(EventRow).order_by(col(EventRow.id))).all())
    assert runs, "the workers drafted nothing: the test tested nothing"

    # at most one publication per effect key
    sent = Counter(post.headers.get("idempotency-key") for post in hook.posts)
    twice = [key for key, count in sent.items() if count > 1]
    assert sent and not twice, _history(events, twice[0].split("|")[1] if twice else "")

    # no published draft that is superseded, rejected or expired
    for key in hook.publications:
        draft = drafts[key.rsplit("|publish:", 1)[0]]
        assert draft.state in (DraftState.PUBLISHED, DraftState.APPROVED), (
            f"{key} was published though its draft is {draft.state}:\n"
            + _history(events, draft.run_id)
        )
    unrecorded = [
        d
        for d in drafts.values()
        if f"{d.key}|publish:webhook" in hook.publications and d.state != DraftState.PUBLISHED
    ]
    assert not unrecorded, "\n".join(
        f"{d.key} is {d.state} though the webhook has it:\n{_history(events, d.run_id)}"
        for d in unrecorded
    )

    # nothing left that nothing will move, and nobody is told about
    alerted = {e.key.split("|")[1] for e in effects.values() if e.step == "alert"}
    for run in runs:
        if run.state in (RunState.PENDING, RunState.RUNNING):
            pytest.fail(f"{run.id} is still {run.state} after everything settled")
        if run.state == RunState.AWAITING_REVIEW:
            draft = drafts.get(run.draft_key or "")
            assert draft is not None and draft.state == DraftState.READY, run.id
        if run.state in (RunState.APPROVED, RunState.PUBLISHING):
            receipt = effects.get(f"{run.draft_key}|publish:webhook")
            assert receipt is not None and receipt.state == EffectState.FAILED, run.id
        if run.state == RunState.UNCERTAIN:
            assert run.id in alerted, f"{run.id} is uncertain and nobody was told"

    # every event chain replays to the stored state
    chains: dict[tuple[str, str], list[EventRow]] = defaultdict(list)
    for event in events:
        chains[(event.subject, event.subject_id)].append(event)
    stored: dict[tuple[str, str], str] = {("run", r.id): r.state for r in runs}
    stored |= {("draft", d.key): d.state for d in drafts.values()}
    stored |= {("effect", e.key): e.state for e in effects.values()}
    for subject, chain in chains.items():
        if subject[0] == "recipe":
            continue
        state: str | None = None
        for event in chain:
            if event.to_state == "released":  # a swept claim: the draft row was deleted
                state = None
                continue
            assert event.from_state == state, (subject, event.from_state, state, event.reason)
            state = event.to_state
        assert stored.get(subject) == state, (subject, stored.get(subject), state)


def _history(events: list[EventRow], run_id: str) -> str:
    """A run's whole history, for the message of a failed invariant."""
    return "\n".join(
        f"{e.at:%H:%M:%S.%f} {e.subject} {e.subject_id[-30:]} {e.from_state}->{e.to_state} "
        f"{e.actor[-20:]} {e.reason}"
        for e in events
        if e.run_id == run_id
    )
