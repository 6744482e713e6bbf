"""The Message Batches adapter: drafting requests sent as one batch, a batch whose create
answer was lost found again, batches polled, and their results read back as replies or
as failures classified by the retry table (docs/design.md §8, §21).

It never re-sends on its own: a create without an answer is an `OUTCOME_UNKNOWN` failure,
and the caller asks `find_again` before sending anything again. The SDK's retries are
off (`max_retries=0`) as for the synchronous drafter, so every request is Galley's own.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from core.drafting.anthropic_drafter import classify, model_reply, status_outcome
from core.drafting.post_shape import tool_params
from core.drafting.prompt_cache import BATCH_TTL, system_param
from core.drafting_policies import AttemptOutcome, BatchEntryResult, BatchProcessing
from core.errors import ModelCallFailed
from core.http_calls import call_timeout
from core.identity import CUSTOM_ID_PATTERN
from core.ports import DraftRequest, ModelReply
from core.telemetry.pricing import caching_pays

if TYPE_CHECKING:
    import anthropic
    import httpx2
    from anthropic.types import Message
    from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse

log = logging.getLogger(__name__)

# Batches are listed from `since` minus this: Anthropic's clock and the database's may
# differ, and a wider window only costs a look at a few more batches.
CLOCK_SKEW = timedelta(minutes=5)
LIST_PAGE = 100  # batches per list request (the API allows 1 to 1,000)
# The HTTP status each error type of an errored entry stands for (the SDK's `ErrorType`),
# so an entry's error follows the same retry table as a synchronous call's.
ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "conflict_error": 409,
    "memory_path_conflict_error": 409,
    "memory_precondition_failed_error": 412,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
# An error type this table does not know is taken as retryable: an errored entry is not
# billed, and max_attempts bounds the retries before a person is told.
UNKNOWN_ERROR_STATUS = 500


@dataclass(frozen=True)
class BatchStatus:
    """One batch as the API shows it now."""

    batch_id: str
    processing: BatchProcessing
    created_at: datetime
    expires_at: datetime
    ended_at: datetime | None
    processing_count: int  # entries without a result yet (all of them until it ends)
    succeeded: int
    errored: int
    canceled: int
    expired: int

    @property
    def ended(self) -> bool:
        return self.processing is BatchProcessing.ENDED

    @property
    def size(self) -> int:
        """Its number of entries: fixed at creation, whatever its state."""
        return self.processing_count + self.succeeded + self.errored + self.canceled + self.expired


@dataclass(frozen=True)
class EntryFailure:
    """An entry of an ended batch that brought no reply, classified like a failed call."""

    custom_id: str
    result: BatchEntryResult  # errored, canceled or expired
    outcome: AttemptOutcome  # REJECTED_RETRYABLE, INVALID_REQUEST or AUTH
    message: str
    error_type: str | None = None  # the API's, for an errored entry

    @property
    def retryable(self) -> bool:
        return self.outcome.retryable

    def error(self) -> ModelCallFailed:
        """The same failure as a synchronous call's, for the attempts ledger."""
        status = ERROR_TYPE_STATUS.get(self.error_type or "")
        return ModelCallFailed(self.outcome, self.message, status=status)


@dataclass(frozen=True)
class Pending:
    """`find_again` cannot tell yet: these batches, created since the attempt began, are
    still in progress and may hold the entries (the API shows an entry's custom_id only
    in the results of an ended batch). Ask again once they have ended."""

    batch_ids: tuple[str, ...]


class BatchDrafter:
    """The Message Batches API through the official client; one HTTP request per call
    (two for `results`, which the SDK begins with a retrieve)."""

    def __init__(
        self,
        api_key: str,
        base_url: str | None = None,
        *,
        timeout: timedelta = timedelta(seconds=60),
        cache: bool = True,
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout  # each request to the batches API, end to end
        self._cache = cache  # False: never mark a system prompt for the cache

    @cached_property
    def _client(self) -> anthropic.Anthropic:
        import anthropic

        return anthropic.Anthropic(api_key=self._api_key, base_url=self._base_url, max_retries=0)

    def submit(self, entries: Sequence[tuple[str, DraftRequest]]) -> str:
        """Create one batch of `entries` (custom_id, request); its id. A failure raises
        `ModelCallFailed`: `OUTCOME_UNKNOWN` means the batch may exist all the same, so
        `find_again` must be asked before these entries are sent again."""
        _check_custom_ids([custom_id for custom_id, _ in entries])
        shared = Counter((r.model, r.system) for _, r in entries if r.system)
        requests = [
            {"custom_id": custom_id, "params": self._params(request, shared)}
            for custom_id, request in entries
        ]
        import anthropic

        try:
            batch = self._client.messages.batches.create(
                requests=requests,  # type: ignore[arg-type]  # TypedDicts built as dicts
                timeout=self._http_timeout(),
            )
        except anthropic.AnthropicError as exc:
            raise classify(exc) from exc
        log.info(
            "batch %s created with %d entries: %s",
            batch.id,
            len(entries),
            ", ".join(f"{cid} ({r.recipe or '?'})" for cid, r in entries),
        )
        return batch.id

    def find_again(
        self,
        custom_ids: Collection[str],
        since: datetime,
        *,
        size: int | None = None,
        known: Collection[str] = (),
    ) -> str | Pending | None:
        """Look before you leap for a create whose answer was lost: the batch created since
        `since` whose results hold any of `custom_ids` (the oldest, should there be two);
        `Pending` while a batch that may hold them has not ended; None when the world
        clearly has none, and only then may they be sent again. `size`, the number of
        entries the lost create sent, rules out batches of any other size, ended or not;
        `known`, the ids of batches already on record, rules those out (an earlier batch
        may hold the same custom_id: an entry that errored there and was sent again)."""
        if not custom_ids:
            raise ValueError("find_again needs at least one custom_id")
        if since.tzinfo is None:
            raise ValueError("since must be an aware datetime")
        import anthropic

        wanted = frozenset(custom_ids)
        horizon = since - CLOCK_SKEW
        found: list[str] = []
        pending: list[str] = []
        try:
            for batch in self._client.messages.batches.list(
                limit=LIST_PAGE, timeout=self._http_timeout()
            ):
                if batch.created_at < horizon:
                    break  # newest first: every later one is older still
                status = _status(batch)
                if batch.id in known or (size is not None and status.size != size):
                    continue
                if not status.ended:
                    pending.append(batch.id)
                elif self._holds_any(batch.id, wanted):
                    found.append(batch.id)
        except anthropic.AnthropicError as exc:
            raise classify(exc) from exc
        if found:
            if len(found) > 1:
                log.warning("entries %s are in %d batches: %s", sorted(wanted), len(found), found)
            log.info("found batch %s again for %s", found[-1], sorted(wanted))
            return found[-1]
        if pending:
            return Pending(tuple(pending))
        return None

    def poll(self, batch_id: str) -> BatchStatus:
        import anthropic

        try:
            batch = self._client.messages.batches.retrieve(batch_id, timeout=self._http_timeout())
        except anthropic.AnthropicError as exc:
            raise classify(exc) from exc
        return _status(batch)

    def cancel(self, batch_id: str) -> BatchStatus:
        """Ask the API to stop a batch; entries not yet begun come back canceled."""
        import anthropic

        try:
            batch = self._client.messages.batches.cancel(batch_id, timeout=self._http_timeout())
        except anthropic.AnthropicError as exc:
            raise classify(exc) from exc
        return _status(batch)

    def results(self, batch_id: str) -> dict[str, ModelReply | EntryFailure]:
        """Every entry of an ended batch by custom_id: its reply, or its classified failure.
        ValueError if the batch has not ended (poll first)."""
        return {entry.custom_id: _entry_result(entry) for entry in self._entries(batch_id)}

    # --- inside ---

    def _params(self, request: DraftRequest, shared: Counter[tuple[str, str]]) -> dict[str, Any]:
        """One entry's Messages API parameters. Its system prompt is marked for the cache
        only when enough entries of this batch share it for the marker to pay."""
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [{"role": "user", "content": request.prompt}],
        }
        if request.system:
            uses = shared[(request.model, request.system)]
            ttl = BATCH_TTL if self._cache and caching_pays(uses, BATCH_TTL) else None
            params["system"] = system_param(request.system, request.model, ttl)
        if request.shape is not None:  # the same structured request as a synchronous call's
            params |= tool_params(request.shape)
        return params

    def _holds_any(self, batch_id: str, wanted: frozenset[str]) -> bool:
        return any(entry.custom_id in wanted for entry in self._entries(batch_id))

    def _entries(self, batch_id: str) -> list[MessageBatchIndividualResponse]:
        import anthropic
        import httpx2

        try:
            stream = self._client.messages.batches.results(batch_id, timeout=self._http_timeout())
        except anthropic.APIError as exc:
            raise classify(exc) from exc
        except anthropic.AnthropicError as exc:  # the SDK's own check: no results_url yet
            raise ValueError(f"batch {batch_id} has not ended: {exc}") from exc
        try:
            return list(stream)
        except httpx2.TransportError as exc:  # the stream broke: reading again is harmless
            raise ModelCallFailed(
                AttemptOutcome.OUTCOME_UNKNOWN,
                f"results of batch {batch_id} cut short ({type(exc).__name__})",
            ) from exc
        finally:
            stream.close()

    def _http_timeout(self) -> httpx2.Timeout:
        import httpx2

        limits = call_timeout(self._timeout)
        return httpx2.Timeout(limits.phase, connect=limits.connect)


def _check_custom_ids(custom_ids: list[str]) -> None:
    """What the API would refuse the whole batch for, refused here before it is sent."""
    if not custom_ids:
        raise ValueError("a batch needs at least one entry")
    bad = [c for c in custom_ids if not CUSTOM_ID_PATTERN.match(c)]
    if bad:
        raise ValueError(f"not a custom_id ({CUSTOM_ID_PATTERN.pattern}): {bad}")
    repeated = sorted(c for c, n in Counter(custom_ids).items() if n > 1)
    if repeated:
        raise ValueError(f"custom_id repeated within one batch: {repeated}")


def _status(batch: MessageBatch) -> BatchStatus:
    counts = batch.request_counts
    return BatchStatus(
        batch_id=batch.id,
        processing=BatchProcessing(batch.processing_status),
        created_at=batch.created_at,
        expires_at=batch.expires_at,
        ended_at=batch.ended_at,
        processing_count=counts.processing,
        succeeded=counts.succeeded,
        errored=counts.errored,
        canceled=counts.canceled,
        expired=counts.expired,
    )


def _entry_result(entry: MessageBatchIndividualResponse) -> ModelReply | EntryFailure:
    result = entry.result
    if result.type == "succeeded":
        return _reply(result.message)
    if result.type == "errored":
        error = result.error.error
        status = ERROR_TYPE_STATUS.get(error.type, UNKNOWN_ERROR_STATUS)
        return EntryFailure(
            entry.custom_id,
            BatchEntryResult.ERRORED,
            status_outcome(status),
            f"{error.type}: {error.message}",
            error_type=error.type,
        )
    why = {
        "canceled": "the batch was cancelled before this entry was run",
        "expired": "the batch reached its 24 hours before this entry was run",
    }
    # Neither was run, so neither was billed: sending it again is only a matter of time.
    return EntryFailure(
        entry.custom_id,
        BatchEntryResult(result.type),
        AttemptOutcome.REJECTED_RETRYABLE,
        why[result.type],
    )


def _reply(message: Message) -> ModelReply:
    """A batch entry's Message as the reply a synchronous call would have given; its
    message id stands in for the request id, which a batch entry does not have."""
    return model_reply(message, message.id)
