"""Every enum of drafting a post, as Galley records or is configured with it: how a
recipe's slots reach the model, what each call came to and why it was made, a redraft's
state, what a near-duplicate or an empty window does, and what a draft learns from.

The value of each member is what is written in the database, in `--json` output, in
Slack messages and in log lines: one spelling everywhere. Like every root module of
core/, it imports only other root modules.
"""

from __future__ import annotations

from enum import StrEnum


class DraftOutcome(StrEnum):
    """What `galley draft` (and the scheduler) report for one slot."""

    DRAFTED = "drafted"
    EXISTS = "exists"
    IN_PROGRESS = "in_progress"
    SKIPPED = "skipped"
    FAILED = "failed"
    QUEUED = "queued"  # scheduler only: waits for the recipe's running draft (queue_one)
    BATCHED = "batched"  # its request waits in a Message Batch; the batch pass stores it


class AttemptOutcome(StrEnum):
    """How one model call ended, as the attempts ledger records it (docs/design.md §8)."""

    OK = "ok"
    ABANDONED = "abandoned"  # the worker died mid-call; its claim was taken over
    NOT_SENT = "not_sent"  # connection refused, DNS, connect timeout: never reached the API
    REJECTED_RETRYABLE = "rejected_retryable"  # 429, 529, 5xx: the API refused the work
    OUTCOME_UNKNOWN = "outcome_unknown"  # read timeout / dropped after the request was sent
    INVALID_REQUEST = "invalid_request"  # 400, 404, 413, 422: our request is wrong
    AUTH = "auth"  # 401, 403: stop and tell people
    # a structured answer that does not parse or misses a version (docs/design.md §30):
    # paid for, but never stored as a half draft; asked again like a 5xx
    MALFORMED_ANSWER = "malformed_answer"

    @property
    def retryable(self) -> bool:
        return self in (
            AttemptOutcome.NOT_SENT,
            AttemptOutcome.REJECTED_RETRYABLE,
            AttemptOutcome.OUTCOME_UNKNOWN,
            AttemptOutcome.MALFORMED_ANSWER,
        )


class AttemptCause(StrEnum):
    """Why a model call was made, as `attempts.cause` stores it."""

    DRAFT = "draft"  # a slot's draft (and its retries, and an on_similar second try)
    REDRAFT = "redraft"  # a reviewer asked for a new revision with a note (docs/design.md §22)
    ALT_TEXT = "alt_text"  # an image's alt text proposed by the model (docs/design.md §32)


class RedraftState(StrEnum):
    """A reviewer's redraft request, one per draft key and revision (`redrafts.state`)."""

    CLAIMED = "claimed"  # asked for; its holder calls the model under a lease
    DONE = "done"  # the answer became the draft's next revision
    FAILED = "failed"  # no new revision: the model failed, or the draft moved on


class OnSimilar(StrEnum):
    """What a recipe does when a fresh draft is close to one people already saw."""

    WARN = "warn"  # say so on the review message
    REDRAFT = "redraft"  # ask the model once more, avoiding the earlier text; keep the better


class SimilarityMethod(StrEnum):
    """How a draft's similarity score was computed, stored beside the score."""

    TOKEN_SET = "rapidfuzz.token_set_ratio"


class Drafting(StrEnum):
    """How a recipe's slots reach the model: one call each, or a batch (docs/design.md §21)."""

    SYNC = "sync"  # one Messages API call per slot, answered while Galley waits
    BATCH = "batch"  # gathered into a Message Batch: half price, answered within 24 hours

    @property
    def cache_ttl(self) -> CacheTtl:
        """The prompt cache's TTL for this way of calling: synchronous calls repeat within
        minutes if at all (a retry, a redraft); a batch's entries may run an hour apart."""
        return CacheTtl.ONE_HOUR if self is Drafting.BATCH else CacheTtl.FIVE_MINUTES


class Variants(StrEnum):
    """How many texts one draft holds (docs/design.md §30)."""

    ONE = "one"  # one text every target publishes (today's draft)
    PER_TARGET = "per_target"  # one version per target, each within its own limit


class CacheTtl(StrEnum):
    """How long the API keeps a cached prompt prefix; the value is the API's own `ttl`."""

    FIVE_MINUTES = "5m"
    ONE_HOUR = "1h"


class BatchProcessing(StrEnum):
    """A Message Batch's `processing_status`, spelled as the API spells it."""

    IN_PROGRESS = "in_progress"
    CANCELING = "canceling"  # cancel asked; entries not yet begun will come back canceled
    ENDED = "ended"  # every entry has a result: its results can be read


class BatchEntryResult(StrEnum):
    """How one entry of an ended batch came back (the API's result `type`)."""

    SUCCEEDED = "succeeded"
    ERRORED = "errored"  # the API answered this entry with an error
    CANCELED = "canceled"  # the batch was cancelled before this entry began
    EXPIRED = "expired"  # the batch reached its 24 hours before this entry began


class OnEmpty(StrEnum):
    """What a run does when its sources have nothing in its window."""

    SKIP = "skip"  # skipped (no_news), at no cost
    DRAFT = "draft"  # drafted from the prompt alone


class LearnFrom(StrEnum):
    """What a recipe's next draft learns from (docs/design.md §27)."""

    NONE = "none"  # the prompt and the sources only
    TOP = "top"  # its best-received posts of the last 90 days, and what reviewers asked
