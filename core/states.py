"""The run, draft and effect state machines (docs/design.md §3).

Only the transitions listed here are legal; `check_*` raises `IllegalTransition` for any
other. Names are contract: they are stored in the database and shown to people.
"""

from __future__ import annotations

from enum import StrEnum

from core.errors import IllegalTransition


class EventSubject(StrEnum):
    """What an event row (`events.subject`) is about: its `subject_id` is that row's key."""

    RECIPE = "recipe"
    RUN = "run"
    DRAFT = "draft"
    EFFECT = "effect"


class RecipeChange(StrEnum):
    """A recipe's event `to_state` other than a new version (`v<n>`, see `version_state`)."""

    PAUSED = "paused"
    RESUMED = "resumed"


VERSION_PREFIX = "v"


def version_state(version: int) -> str:
    """A bump's event `to_state`: the recipe's new version, `v3`."""
    return f"{VERSION_PREFIX}{version}"


def is_version_state(to_state: str) -> bool:
    return to_state.startswith(VERSION_PREFIX) and to_state[len(VERSION_PREFIX) :].isdigit()


class RunState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    AWAITING_REVIEW = "awaiting_review"
    APPROVED = "approved"
    PUBLISHING = "publishing"
    SUCCEEDED = "succeeded"
    SKIPPED = "skipped"
    REJECTED = "rejected"
    EXPIRED = "expired"
    UNCERTAIN = "uncertain"
    FAILED = "failed"
    CANCELLED = "cancelled"


class DraftState(StrEnum):
    CLAIMED = "claimed"
    READY = "ready"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    PUBLISHED = "published"
    CANCELLED = "cancelled"  # its run was cancelled: nobody reviews or publishes it


class BatchState(StrEnum):
    """A Message Batch as Galley tracks it (docs/design.md §21)."""

    SUBMITTING = "submitting"  # its entries are chosen; the create is (re)sent or looked for
    WAITING = "waiting"  # the API holds it: polled until it ends
    ENDED = "ended"  # its results were read and every entry stored, retried or failed
    FAILED = "failed"  # the API refused the create for good: its entries failed


class EffectState(StrEnum):
    IN_FLIGHT = "in_flight"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNCERTAIN = "uncertain"


_R = RunState
# A run is one slot of one recipe. Leaving a closed state back to `running` happens
# only when a new draft key is claimed for the slot: a bumped version, or a person's
# manual run of a slot the scheduler skipped or that failed.
_REOPEN = {_R.RUNNING}
RUN_TRANSITIONS: dict[RunState, set[RunState]] = {
    _R.PENDING: {_R.RUNNING, _R.SKIPPED, _R.CANCELLED},
    # a refusal for a running run's slot must not strand a paid draft: only its holder
    # skips it, before any model call, when its sources had nothing new (no_news,
    # docs/design.md §27)
    _R.RUNNING: {_R.AWAITING_REVIEW, _R.PENDING, _R.FAILED, _R.CANCELLED, _R.SKIPPED},
    _R.AWAITING_REVIEW: {
        _R.APPROVED,
        _R.REJECTED,
        _R.EXPIRED,
        _R.CANCELLED,
        _R.RUNNING,
        _R.PENDING,
    },
    # failed: found past its slot plus publish_late, never published late (docs/design.md §23)
    _R.APPROVED: {_R.PUBLISHING, _R.SUCCEEDED, _R.AWAITING_REVIEW, _R.CANCELLED, _R.FAILED},
    # back to review from publishing or uncertain: the approval went stale before a send
    _R.PUBLISHING: {_R.SUCCEEDED, _R.UNCERTAIN, _R.FAILED, _R.CANCELLED, _R.AWAITING_REVIEW},
    _R.UNCERTAIN: {_R.SUCCEEDED, _R.PUBLISHING, _R.FAILED, _R.CANCELLED, _R.AWAITING_REVIEW},
    _R.SKIPPED: _REOPEN | {_R.SKIPPED},
    # a person re-drafts it, skips it, or retries a refused publication once fixed; or
    # cancels one approved draft that missed its time (docs/design.md §23), so it never goes out;
    # pending: a person's retry of an item run the gate refused waits its turn
    # (docs/design.md §29)
    _R.FAILED: _REOPEN | {_R.SKIPPED, _R.PUBLISHING, _R.CANCELLED, _R.PENDING},
    _R.SUCCEEDED: _REOPEN,
    _R.REJECTED: _REOPEN,
    _R.EXPIRED: _REOPEN,
    _R.CANCELLED: _REOPEN,
}

_D = DraftState
DRAFT_TRANSITIONS: dict[DraftState, set[DraftState]] = {
    _D.CLAIMED: {_D.READY, _D.CANCELLED},
    _D.READY: {_D.APPROVED, _D.REJECTED, _D.EXPIRED, _D.SUPERSEDED, _D.CANCELLED},
    # an approved draft whose send may have gone out stays approved when its run is
    # cancelled, so the send's outcome can still be recorded against it
    _D.APPROVED: {_D.PUBLISHED, _D.READY, _D.SUPERSEDED, _D.CANCELLED},
    _D.REJECTED: set(),
    _D.EXPIRED: set(),
    _D.SUPERSEDED: set(),
    _D.PUBLISHED: set(),
    _D.CANCELLED: set(),
}

_E = EffectState
EFFECT_TRANSITIONS: dict[EffectState, set[EffectState]] = {
    _E.IN_FLIGHT: {_E.SUCCEEDED, _E.FAILED, _E.UNCERTAIN},
    _E.UNCERTAIN: {_E.SUCCEEDED, _E.FAILED, _E.IN_FLIGHT},
    # back to uncertain: a receipt a retry reopened (it may have been sent), whose run
    # was cancelled before the publish pass looked (core/operations/resolution.py)
    _E.FAILED: {_E.IN_FLIGHT, _E.UNCERTAIN},
    _E.SUCCEEDED: set(),
}

# Named sets of states: code asks "is it final?", "may it be published?", never spells
# out a tuple of members of its own.
RUN_OPEN_STATES = frozenset(
    {_R.PENDING, _R.RUNNING, _R.AWAITING_REVIEW, _R.APPROVED, _R.PUBLISHING, _R.UNCERTAIN}
)
# Nothing moves a run out of these on its own; only a person reopens one (a bump, a
# manual run, a retry).
RUN_FINAL_STATES = frozenset(set(RunState) - RUN_OPEN_STATES)
# A holder is working on it under a deadline: the states a run can be stuck in
# (core/operations/stuck.py).
RUN_WORKING_STATES = frozenset({_R.RUNNING, _R.PUBLISHING})
# What the Home tab, the digest and the gauges look through for runs needing a person:
# uncertain ones, and those that may be stuck.
RUN_WATCHED_STATES = RUN_WORKING_STATES | {_R.UNCERTAIN}
# Approved and not yet known published: what a publishing pass takes up.
RUN_PUBLISHABLE_STATES = frozenset({_R.APPROVED, _R.PUBLISHING, _R.UNCERTAIN})
# Only a person can settle these (resolve, retry, skip, cancel).
RUN_SETTLED_BY_PEOPLE = frozenset({_R.UNCERTAIN, _R.FAILED})

# Not yet decided or published: what the `galley_drafts` gauge shows.
DRAFT_LIVE_STATES = frozenset({_D.CLAIMED, _D.READY, _D.APPROVED})
# People said yes (a publication counts as an approval).
DRAFT_APPROVED_STATES = frozenset({_D.APPROVED, _D.PUBLISHED})
# Reviewed one way or the other, an expired draft being one nobody wanted: the drafts an
# approval rate is counted over.
DRAFT_DECIDED_STATES = DRAFT_APPROVED_STATES | {_D.REJECTED, _D.EXPIRED}
# A draft entering one of these has left review: decided, expired, superseded or cancelled.
DRAFT_PAST_REVIEW_STATES = DRAFT_DECIDED_STATES | {_D.SUPERSEDED, _D.CANCELLED}

# How an effect ended, as far as Galley knows: what the publication and alert counters count.
EFFECT_OUTCOME_STATES = frozenset({_E.SUCCEEDED, _E.FAILED, _E.UNCERTAIN})
# A receipt not settled yet: it may still happen, or may have happened.
EFFECT_UNSETTLED_STATES = frozenset({_E.IN_FLIGHT, _E.UNCERTAIN})


def run_may_move(current: RunState, target: RunState) -> bool:
    """Whether a run in `current` may move to `target` (`check_run` raises instead)."""
    return target in RUN_TRANSITIONS[current]


def check_run(current: RunState, target: RunState) -> None:
    if not run_may_move(current, target):
        raise IllegalTransition(f"run cannot go from {current} to {target}")


def check_draft(current: DraftState, target: DraftState) -> None:
    if target not in DRAFT_TRANSITIONS[current]:
        raise IllegalTransition(f"draft cannot go from {current} to {target}")


def check_effect(current: EffectState, target: EffectState) -> None:
    if target not in EFFECT_TRANSITIONS[current]:
        raise IllegalTransition(f"effect cannot go from {current} to {target}")
