"""The daily operations digest for the alert channel: what is stuck, failing, skipped
or about to expire, and how often people approve. Read-only over the store; posted
once per day across replicas (one receipt per day).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlmodel import col, select

from core.config import Config
from core.effects import EffectLedger, EffectSpec, Proof
from core.models import DraftRow, RunRow
from core.ports import MessageRef
from core.states import DraftState, RunState
from core.store import Store

DAY = timedelta(days=1)
EXPIRY_WARNING = timedelta(hours=12)
APPROVAL_WINDOW = timedelta(days=30)
REPEATED_FAILURES = 2


def post_digest(
    store: Store,
    config: Config,
    ledger: EffectLedger,
    now: datetime,
    post: Callable[[str], MessageRef],
) -> bool:
    """Today's digest, once per day in the digest's zone across replicas; True if posted."""
    day = now.astimezone(ZoneInfo(config.slack.digest_timezone)).date().isoformat()
    spec = EffectSpec(
        f"digest|{day}",
        draft_key="",
        step="digest",
        payload={"day": day},
        lease=timedelta(minutes=5),
    )
    existing = ledger.get(spec.key)
    if existing is not None and existing.state != "failed":
        return False

    def send() -> Proof:
        return Proof(post(build_digest(store, config, now)).ts)

    return ledger.perform(spec, send) is not None


def build_digest(store: Store, config: Config, now: datetime) -> str:
    """The digest as mrkdwn lines (Galley's own text: recipe names and run ids only)."""
    with store.transaction() as session:
        open_runs = session.exec(
            select(RunRow).where(
                col(RunRow.state).in_([RunState.UNCERTAIN, RunState.RUNNING, RunState.PUBLISHING])
            )
        ).all()
        recent = session.exec(select(RunRow).where(col(RunRow.updated_at) >= now - DAY)).all()
        ready = session.exec(select(DraftRow).where(col(DraftRow.state) == DraftState.READY)).all()
        decided = session.exec(
            select(DraftRow).where(
                col(DraftRow.updated_at) >= now - APPROVAL_WINDOW,
                col(DraftRow.state).in_(
                    [
                        DraftState.APPROVED,
                        DraftState.PUBLISHED,
                        DraftState.REJECTED,
                        DraftState.EXPIRED,
                    ]
                ),
            )
        ).all()
    lines = [f"*Galley daily digest* · {now:%Y-%m-%d %H:%M} UTC"]
    lines += _stuck(open_runs, config, now)
    lines += _failing(recent)
    lines += _skipped(recent)
    lines += _expiring(ready, config, now)
    lines += _approval_rates(decided)
    return "\n".join(lines)


def _stuck(runs: Sequence[RunRow], config: Config, now: datetime) -> list[str]:
    flagged = []
    for run in runs:
        recipe = config.recipes.get(run.recipe)
        limit = recipe.claim_lease * 2 if recipe else DAY
        if run.state == RunState.UNCERTAIN or now - run.updated_at > limit:
            flagged.append(f"`{run.id}` ({run.state} since {run.updated_at:%m-%d %H:%M})")
    return (
        [f"• Needs a person: {', '.join(flagged)}"]
        if flagged
        else ["• Nothing stuck or uncertain."]
    )


def _failing(runs: Sequence[RunRow]) -> list[str]:
    failures = Counter(r.recipe for r in runs if r.state == RunState.FAILED)
    repeated = [
        f"*{name}* x{count}" for name, count in failures.items() if count >= REPEATED_FAILURES
    ]
    return [f"• Failing repeatedly (24h): {', '.join(sorted(repeated))}"] if repeated else []


def _skipped(runs: Sequence[RunRow]) -> list[str]:
    reasons = Counter(r.reason or "unknown" for r in runs if r.state == RunState.SKIPPED)
    if not reasons:
        return []
    return [
        "• Skipped (24h): " + ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items()))
    ]


def _expiring(ready: Sequence[DraftRow], config: Config, now: datetime) -> list[str]:
    soon = []
    for draft in ready:
        recipe = config.recipes.get(draft.recipe)
        if recipe is None or draft.ready_at is None:
            continue
        expires = draft.ready_at + recipe.review_window
        if expires - now <= EXPIRY_WARNING:
            soon.append(f"`{draft.run_id}` (expires {expires:%m-%d %H:%M} UTC)")
    return [f"• About to expire unreviewed: {', '.join(soon)}"] if soon else []


def _approval_rates(decided: Sequence[DraftRow]) -> list[str]:
    totals: Counter[str] = Counter(d.recipe for d in decided)
    approved = Counter(
        d.recipe for d in decided if d.state in (DraftState.APPROVED, DraftState.PUBLISHED)
    )
    if not totals:
        return []
    rates = ", ".join(
        f"*{name}* {approved[name]}/{total} ({approved[name] / total:.0%})"
        for name, total in sorted(totals.items())
    )
    return [f"• Approved over 30 days: {rates}"]
