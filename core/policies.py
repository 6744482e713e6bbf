"""Every policy and reason Galley records, as enums.

The value of each member is what is written in the database, in `--json` output, in
Slack messages and in log lines: one spelling everywhere.
"""

from __future__ import annotations

from enum import StrEnum


class Overlap(StrEnum):
    """What a recipe does when a slot fires while its previous run still works."""

    SKIP = "skip"
    QUEUE_ONE = "queue_one"


class DstGap(StrEnum):
    """What to do with a wall-clock slot that does not exist (spring forward)."""

    SHIFT = "shift"
    SKIP = "skip"


class DstRepeat(StrEnum):
    """What to do with a wall-clock slot that happens twice (fall back)."""

    FIRST = "first"
    BOTH = "both"


class SkipReason(StrEnum):
    BACKPRESSURE = "backpressure"
    PAUSED = "paused"
    OVERLAP = "overlap"
    MISFIRE = "misfire"
    BUDGET = "budget"


class FailReason(StrEnum):
    INVALID_REQUEST = "invalid_request"
    AUTH = "auth"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    EMPTY_RESPONSE = "empty_response"
    PUBLISH_REJECTED = "publish_rejected"  # the destination refused the publication itself
    PUBLISH_AUTH = "publish_auth"  # the destination refused Galley's credentials


class DraftOutcome(StrEnum):
    """What `galley draft` (and the scheduler) report for one slot."""

    DRAFTED = "drafted"
    EXISTS = "exists"
    IN_PROGRESS = "in_progress"
    SKIPPED = "skipped"
    FAILED = "failed"
    QUEUED = "queued"  # scheduler only: waits for the recipe's running draft (queue_one)


class AttemptOutcome(StrEnum):
    """How one model call ended, as the attempts ledger records it (DESIGN.md §4.4)."""

    OK = "ok"
    ABANDONED = "abandoned"  # the worker died mid-call; its claim was taken over
    NOT_SENT = "not_sent"  # connection refused, DNS, connect timeout: never reached the API
    REJECTED_RETRYABLE = "rejected_retryable"  # 429, 529, 5xx: the API refused the work
    OUTCOME_UNKNOWN = "outcome_unknown"  # read timeout / dropped after the request was sent
    INVALID_REQUEST = "invalid_request"  # 400, 404, 413, 422: our request is wrong
    AUTH = "auth"  # 401, 403: stop and tell people

    @property
    def retryable(self) -> bool:
        return self in (
            AttemptOutcome.NOT_SENT,
            AttemptOutcome.REJECTED_RETRYABLE,
            AttemptOutcome.OUTCOME_UNKNOWN,
        )


class OnSimilar(StrEnum):
    """What a recipe does when a fresh draft is close to one people already saw."""

    WARN = "warn"  # say so on the review message
    REDRAFT = "redraft"  # ask the model once more, avoiding the earlier text; keep the better


class SimilarityMethod(StrEnum):
    """How a draft's similarity score was computed, stored beside the score."""

    TOKEN_SET = "rapidfuzz.token_set_ratio"
