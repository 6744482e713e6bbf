"""A hand-computed week of history for the report (docs/design.md §38), written as the
rows Galley's own passes leave: drafts and their revisions, decision events, model
calls, published posts read back (or not) with each reading.

Recipe `weekly` (targets Bluesky and a webhook), drafts made ready in the week:
- d1 published at revision 1, nothing changed, decided 30 min after ready (first pass);
- d2 edited once (`Hello world` → `Hello there world`), published, decided after 60 min;
- d3 drafted (`xyz`), redrafted (`abc`) and edited (`abd`), published, decided after 90 min;
- d4 and d5 rejected `off-topic` after 10 and 20 min; d6 expired;
- d7 approved in two stages (two approvals) at revision 1 after 120 min, 23 h ago:
  first pass;
- d8 waiting; d0 was ready before the window (not counted).
On Bluesky before the week: six posts read at 1h (1 1 2 2 3 3) and 1d (2 4 4 6 8 10).
In the week: d1's post read at 1h (score 3) and 1d (score 10): lift 10 / 5 = 2;
d2's post read at 1h (score 5), then found gone: no lift; d3's post never read.
Every published draft also went to the webhook, which has no engagement.
Recipe `small`: one draft published at first pass, one rejected: too few to rate.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from core.api.galley import Galley
from core.identity import draft_key, run_id, text_hash
from core.models import (
    AttemptRow,
    DraftRevisionRow,
    DraftRow,
    EventRow,
    PostCheckRow,
    PostReadingRow,
    RecipeRow,
    RunRow,
)
from core.policies import PostCheck
from core.setup.config import Config, parse_config
from core.states import DraftState, RunState
from core.store.engine import Store
from core.testing import FrozenClock

NOW = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)  # a Monday
BLUESKY = "bluesky:acme.bsky.social"
WEBHOOK = "webhook:ops"
MODEL = "claude-sonnet-4-5"
BEST_URL = "https://bsky.app/profile/acme.bsky.social/post/d1"


def seed(store: Store) -> None:
    with store.transaction() as session:
        for name in ("weekly", "small"):
            session.add(RecipeRow(name=name, updated_at=NOW))
        session.flush()
        weekly = [
            ("d0", DraftState.PUBLISHED, 1, -8 * 24 * 60, 30, None),
            ("d1", DraftState.PUBLISHED, 1, -6 * 24 * 60, 30, None),
            ("d2", DraftState.PUBLISHED, 2, -5 * 24 * 60, 60, None),
            ("d3", DraftState.PUBLISHED, 3, -4 * 24 * 60, 90, None),
            ("d4", DraftState.REJECTED, 1, -3 * 24 * 60, 10, "off-topic"),
            ("d5", DraftState.REJECTED, 1, -3 * 24 * 60 + 60, 20, "off-topic "),
            ("d6", DraftState.EXPIRED, 1, -2 * 24 * 60, None, None),
            ("d7", DraftState.APPROVED, 1, -23 * 60, 120, None),
            ("d8", DraftState.READY, 1, -60, None, None),
        ]
        small = [
            ("s1", DraftState.PUBLISHED, 1, -2 * 24 * 60, 5, None),
            ("s2", DraftState.REJECTED, 1, -24 * 60, 5, "too long"),
        ]
        keys = {}
        for recipe, drafts in (("weekly", weekly), ("small", small)):
            for name, state, revision, ready, waited, reason in drafts:
                keys[name] = _draft(session, recipe, name, state, revision, ready, waited, reason)
        session.flush()
        _revisions(session, keys)
        session.flush()
        _changes(session, keys)
        _attempts(session, keys)
        _posts(session, keys)


def _draft(
    session: Any,
    recipe: str,
    name: str,
    state: DraftState,
    revision: int,
    ready_minutes: int,
    waited: int | None,
    reason: str | None,
) -> str:
    ready = NOW + timedelta(minutes=ready_minutes)
    run = run_id(recipe, ready.replace(tzinfo=None, second=0, microsecond=0))
    key = draft_key("bluesky", run, 1)
    run_state = RunState.SUCCEEDED if state == DraftState.PUBLISHED else RunState.AWAITING_REVIEW
    session.add(
        RunRow(id=run, recipe=recipe, slot_wall=ready.isoformat(), slot_at=ready,
               state=run_state, draft_key=key, created_at=ready, updated_at=ready)
    )  # fmt: skip
    session.flush()  # the run before its draft (no ORM relationship orders them)
    text = {"d2": "Hello there world", "d3": "abd"}.get(name, f"text of {name}")
    decided = None if waited is None else ready + timedelta(minutes=waited)
    session.add(
        DraftRow(key=key, run_id=run, recipe=recipe, platform="bluesky", version=1, state=state,
                 text=text, text_hash=text_hash(text), revision=revision, model=MODEL,
                 ready_at=ready, decided_at=decided, decision_reason=reason,
                 created_at=ready, updated_at=decided or ready)
    )  # fmt: skip
    return key


def _revisions(session: Any, keys: dict[str, str]) -> None:
    model, person = f"model:{MODEL}", "U1"
    texts = {
        "d2": [("Hello world", model), ("Hello there world", person)],
        "d3": [("xyz", model), ("abc", model), ("abd", person)],  # drafted, redrafted, edited
    }
    for name, kept in texts.items():
        for number, (text, author) in enumerate(kept, start=1):
            session.add(
                DraftRevisionRow(draft_key=keys[name], revision=number, text=text,
                                 text_hash=text_hash(text), written_by=author, written_at=NOW)
            )  # fmt: skip


def _event(session: Any, key: str, decision: str, revision: int, at: datetime) -> None:
    session.add(
        EventRow(at=at, subject="draft", subject_id=key, run_id=key.split("|")[1],
                 from_state="ready", to_state="ready", actor="U1", decision=decision,
                 revision=revision)
    )  # fmt: skip


def _changes(session: Any, keys: dict[str, str]) -> None:
    at = NOW - timedelta(days=1)
    _event(session, keys["d2"], "edit", 2, at)
    _event(session, keys["d3"], "redraft", 2, at)
    _event(session, keys["d3"], "edit", 3, at)
    _event(session, keys["d7"], "approval", 1, at)  # the first stage passed
    _event(session, keys["d7"], "approval", 1, at)  # the second: approved, unchanged
    _event(session, keys["d1"], "approval", 1, at)
    _event(session, keys["d0"], "edit", 2, NOW - timedelta(days=8))  # before the window


def _attempts(session: Any, keys: dict[str, str]) -> None:
    for number, name in enumerate(("d1", "d2", "d3", "d3")):
        key = keys[name]
        session.add(
            AttemptRow(id=f"{key}#{number}", run_id=key.split("|")[1], recipe="weekly",
                       draft_key=key, number=number, worker="w", model=MODEL,
                       started_at=NOW - timedelta(days=3), finished_at=NOW - timedelta(days=3),
                       outcome="ok", input_tokens=1000, output_tokens=200)
        )  # fmt: skip


def _post(
    session: Any,
    recipe: str,
    key: str,
    target: str,
    at: datetime,
    state: PostCheck,
    readings: dict[str, int],
    best: bool = False,
) -> None:
    receipt = f"{key}|publish:{target}"
    url = f"https://bsky.app/profile/acme.bsky.social/post/{key.rsplit('@', 1)[-1][:10]}"
    url = BEST_URL if best else url if target == BLUESKY else None
    session.add(
        PostCheckRow(receipt=receipt, recipe=recipe, target=target,
                     external_id=receipt, url=url,
                     published_at=at, state=state, readings_done=len(readings))
    )  # fmt: skip
    for label, points in readings.items():
        after = {"1h": 3600, "1d": 86400}[label]
        session.add(
            PostReadingRow(receipt=receipt, label=label, after_seconds=after,
                           recipe=recipe, target=target, read_at=at + timedelta(seconds=after),
                           likes=points)
        )  # fmt: skip


def _posts(session: Any, keys: dict[str, str]) -> None:
    earlier = [(1, 2), (1, 4), (2, 4), (2, 6), (3, 8), (3, 10)]
    for n, (first, day) in enumerate(earlier):
        at = NOW - timedelta(days=30 - n)
        _post(
            session,
            "weekly",
            f"weekly|old{n}",
            BLUESKY,
            at,
            PostCheck.VERIFIED,
            {"1h": first, "1d": day},
        )
    week = {
        "d1": (PostCheck.VERIFIED, {"1h": 3, "1d": 10}),
        "d2": (PostCheck.GONE, {"1h": 5}),
        "d3": (PostCheck.DUE, {}),
    }
    for n, (name, (state, readings)) in enumerate(week.items()):
        at = NOW - timedelta(days=5 - n)
        _post(session, "weekly", keys[name], BLUESKY, at, state, readings, best=name == "d1")
        _post(session, "weekly", keys[name], WEBHOOK, at, PostCheck.VERIFIED, {})
    _post(session, "small", keys["s1"], WEBHOOK, NOW - timedelta(days=1), PostCheck.VERIFIED, {})


def report_config() -> Config:
    """The two recipes of the history, so a `Galley` reads them."""
    recipes = "".join(
        f'\n[[recipes]]\nname = "{name}"\nplatform = "bluesky"\nschedule = "0 10 * * *"\n'
        'system = "s"\nprompt = "p"\n'
        for name in ("weekly", "small")
    )
    return parse_config(f'[slack]\nreview_channel = "C0R"\n[defaults]\nmodel = "m"\n{recipes}')


def report_galley(store: Store) -> Galley:
    """A `Galley` over the seeded store, its clock at NOW."""
    return Galley(report_config(), store, clock=FrozenClock(NOW))
