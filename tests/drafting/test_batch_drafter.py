"""The Message Batches adapter (docs/design.md §21), driven through the real `anthropic` SDK
against the fake over real HTTP: what the fake recorded is the evidence, never a log."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting.batch_drafter import BatchDrafter, EntryFailure, Pending
from core.drafting_policies import AttemptOutcome, BatchEntryResult, BatchProcessing
from core.errors import ModelCallFailed
from core.identity import batch_custom_id, draft_key, run_id
from core.ports import DraftRequest, ModelReply
from tests.fakes.anthropic_api import FakeAnthropic, closed_port
from tests.fakes.anthropic_batches import (
    accept,
    accept_then_drop,
    accept_then_hang,
    errored,
    expired,
    status,
)
from tests.harness.slow_marks import starts_a_server

LONG_SYSTEM = "Write in the house style: short sentences, no jargon, one idea a line. " * 60


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def drafter(url: str, **kwargs: object) -> BatchDrafter:
    return BatchDrafter(api_key="test", base_url=url, **kwargs)  # type: ignore[arg-type]


def request(prompt: str = "Write the weekly update.", system: str = "Be warm.") -> DraftRequest:
    return DraftRequest(
        model="claude-sonnet-5-5",
        system=system,
        prompt=prompt,
        max_tokens=300,
        timeout=timedelta(seconds=30),
        recipe="weekly-update",
    )


def custom_id(day: int, platform: str = "linkedin") -> str:
    run = run_id("weekly-update", datetime(2026, 10, day, 9))
    return batch_custom_id(draft_key(platform, run, 1))


def entries(*days: int) -> list[tuple[str, DraftRequest]]:
    return [(custom_id(day), request(f"Write the update for day {day}.")) for day in days]


def now() -> datetime:
    return datetime.now(UTC)


def test_submit_poll_results_gives_each_draft_key_its_reply(fake: FakeAnthropic) -> None:
    batch = drafter(fake.url)
    batch_id = batch.submit(entries(5, 12, 19))
    status_ = batch.poll(batch_id)
    assert status_.ended
    assert (status_.succeeded, status_.size) == (3, 3)
    replies = batch.results(batch_id)
    assert set(replies) == {custom_id(5), custom_id(12), custom_id(19)}
    reply = replies[custom_id(12)]
    assert isinstance(reply, ModelReply)
    assert reply.text == "Draft for: Write the update for day 12."
    assert reply.model == "claude-sonnet-5-5"
    assert reply.request_id is not None and reply.request_id.startswith("msg_")
    assert (reply.input_tokens, reply.output_tokens) == (12, 34)
    [create] = fake.batches.creates
    sent = {r["custom_id"]: r["params"] for r in create.body["requests"]}
    assert sent[custom_id(5)] == {
        "model": "claude-sonnet-5-5",
        "max_tokens": 300,
        "messages": [{"role": "user", "content": "Write the update for day 5."}],
        "system": "Be warm.",
    }


def test_a_batch_in_progress_polls_in_progress_until_it_ends(fake: FakeAnthropic) -> None:
    batch = drafter(fake.url)
    fake.batches.script(accept(looks=2))
    batch_id = batch.submit(entries(5))
    seen = [batch.poll(batch_id).processing for _ in range(3)]
    assert seen == [BatchProcessing.IN_PROGRESS] * 2 + [BatchProcessing.ENDED]


def test_results_before_the_batch_ends_are_refused(fake: FakeAnthropic) -> None:
    fake.batches.hold = True
    batch = drafter(fake.url)
    batch_id = batch.submit(entries(5))
    with pytest.raises(ValueError, match="not ended"):
        batch.results(batch_id)


@pytest.mark.parametrize("lost", [accept_then_drop(), accept_then_hang(30)])
def test_a_lost_create_answer_is_found_again_and_never_sent_twice(
    fake: FakeAnthropic, lost: object
) -> None:
    began = now()
    batch = drafter(fake.url, timeout=timedelta(seconds=1))
    fake.batches.script(lost)  # type: ignore[arg-type]
    mine = entries(5, 12)
    with pytest.raises(ModelCallFailed) as info:
        batch.submit(mine)
    assert info.value.outcome is AttemptOutcome.OUTCOME_UNKNOWN
    found = batch.find_again([custom_id(12)], since=began)
    [created] = fake.batches.created
    assert found == created.id
    replies = batch.results(found)
    assert {k: type(v) for k, v in replies.items()} == {c: ModelReply for c, _ in mine}
    assert len(fake.batches.creates) == 1
    assert fake.batches.entries_sent == [c for c, _ in mine]


def test_a_lost_create_still_in_progress_is_pending_until_it_ends(fake: FakeAnthropic) -> None:
    began = now()
    batch = drafter(fake.url)
    fake.batches.hold = True
    fake.batches.script(accept_then_drop())
    with pytest.raises(ModelCallFailed):
        batch.submit(entries(5))
    [created] = fake.batches.created
    assert batch.find_again([custom_id(5)], since=began) == Pending((created.id,))
    assert batch.find_again([custom_id(5)], since=began) == Pending((created.id,))
    fake.batches.release()
    assert batch.find_again([custom_id(5)], since=began) == created.id
    assert len(fake.batches.creates) == 1


def test_a_batch_of_another_size_is_not_waited_for(fake: FakeAnthropic) -> None:
    began = now()
    batch = drafter(fake.url)
    fake.batches.hold = True
    other = batch.submit(entries(5, 12, 19))  # another replica's, still running
    fake.batches.script(accept_then_drop())
    with pytest.raises(ModelCallFailed):
        batch.submit(entries(26))
    lost = fake.batches.created[-1].id
    assert batch.find_again([custom_id(26)], since=began) == Pending((lost, other))
    assert batch.find_again([custom_id(26)], since=began, size=1) == Pending((lost,))


def test_nothing_created_since_the_attempt_began_is_clearly_absent(fake: FakeAnthropic) -> None:
    batch = drafter(fake.url)
    batch.submit(entries(26))  # an ended batch that holds other entries
    fake.batches.now = lambda: (now() - timedelta(hours=2)).timestamp()
    batch.submit(entries(5))  # ours, but from before the attempt: listed, not matched
    fake.batches.now = lambda: now().timestamp()
    fake.batches.script(status(529))
    with pytest.raises(ModelCallFailed):
        batch.submit(entries(5))
    assert batch.find_again([custom_id(5)], since=now() - timedelta(minutes=1)) is None


def test_find_again_stops_listing_at_the_first_batch_older_than_the_window(
    fake: FakeAnthropic,
) -> None:
    batch = drafter(fake.url)
    fake.batches.now = lambda: (now() - timedelta(days=2)).timestamp()
    for day in (5, 12, 19):
        batch.submit(entries(day))
    fake.batches.now = lambda: now().timestamp()
    before = len(fake.requests)
    assert batch.find_again([custom_id(5)], since=now()) is None
    looked = [r.path.split("?")[0] for r in fake.requests[before:]]
    assert looked == ["/v1/messages/batches"]  # one page, no results read


def test_errored_expired_and_canceled_entries_are_classified_by_the_retry_table(
    fake: FakeAnthropic,
) -> None:
    fake.batches.script_entries(
        {
            custom_id(5): errored("overloaded_error", "busy"),
            custom_id(12): errored("invalid_request_error", "max_tokens: too large"),
            custom_id(19): errored("authentication_error", "bad key"),
            custom_id(26): expired(),
        }
    )
    batch = drafter(fake.url)
    replies = batch.results(batch.submit(entries(5, 12, 19, 26, 2)))
    failures = {k: v for k, v in replies.items() if isinstance(v, EntryFailure)}
    assert isinstance(replies[custom_id(2)], ModelReply)
    assert {k: (v.result, v.outcome, v.retryable) for k, v in failures.items()} == {
        custom_id(5): (BatchEntryResult.ERRORED, AttemptOutcome.REJECTED_RETRYABLE, True),
        custom_id(12): (BatchEntryResult.ERRORED, AttemptOutcome.INVALID_REQUEST, False),
        custom_id(19): (BatchEntryResult.ERRORED, AttemptOutcome.AUTH, False),
        custom_id(26): (BatchEntryResult.EXPIRED, AttemptOutcome.REJECTED_RETRYABLE, True),
    }
    assert failures[custom_id(12)].message == "invalid_request_error: max_tokens: too large"
    error = failures[custom_id(12)].error()
    assert (error.outcome, error.status, str(error)) == (
        AttemptOutcome.INVALID_REQUEST,
        400,
        "invalid_request_error: max_tokens: too large",
    )


def test_an_entry_the_api_cannot_run_fails_for_good(fake: FakeAnthropic) -> None:
    batch = drafter(fake.url)
    bad = DraftRequest("claude-sonnet-5-5", "", "Write.", 0, timedelta(seconds=30))
    replies = batch.results(batch.submit([(custom_id(5), bad)]))
    failure = replies[custom_id(5)]
    assert isinstance(failure, EntryFailure)
    assert failure.outcome is AttemptOutcome.INVALID_REQUEST


def test_a_cancelled_batch_returns_its_entries_canceled_and_retryable(fake: FakeAnthropic) -> None:
    fake.batches.hold = True
    batch = drafter(fake.url)
    batch_id = batch.submit(entries(5, 12))
    assert batch.cancel(batch_id).processing is BatchProcessing.CANCELING
    assert batch.poll(batch_id).canceled == 2
    failures = batch.results(batch_id).values()
    assert {(f.result, f.retryable) for f in failures if isinstance(f, EntryFailure)} == {
        (BatchEntryResult.CANCELED, True)
    }


def test_overloaded_on_create_is_retryable_and_creates_nothing(fake: FakeAnthropic) -> None:
    fake.batches.script(status(529, headers={"retry-after": "7"}))
    with pytest.raises(ModelCallFailed) as info:
        drafter(fake.url).submit(entries(5))
    assert info.value.outcome is AttemptOutcome.REJECTED_RETRYABLE
    assert (info.value.status, info.value.retry_after) == (529, 7.0)
    assert fake.batches.created == []
    assert len(fake.batches.creates) == 1  # no retry inside the SDK


def test_an_unreachable_api_means_the_batch_was_never_sent() -> None:
    with pytest.raises(ModelCallFailed) as info:
        drafter(f"http://127.0.0.1:{closed_port()}").submit(entries(5))
    assert info.value.outcome is AttemptOutcome.NOT_SENT


@pytest.mark.parametrize(
    "bad",
    [
        [("has space", request())],
        [("x" * 65, request())],
        [(custom_id(5), request()), (custom_id(5), request("again"))],
        [],
    ],
)
def test_a_batch_the_api_would_refuse_is_never_sent(
    fake: FakeAnthropic, bad: list[tuple[str, DraftRequest]]
) -> None:
    with pytest.raises(ValueError):
        drafter(fake.url).submit(bad)
    assert fake.requests == []


def test_custom_ids_from_draft_keys_are_accepted_and_told_apart_by_the_api(
    fake: FakeAnthropic,
) -> None:
    run = run_id("weekly-update", datetime(2026, 10, 5, 9))
    keys = [draft_key(p, run, v) for p in ("linkedin", "x", "blog") for v in (1, 2)]
    batch = drafter(fake.url)
    replies = batch.results(batch.submit([(batch_custom_id(k), request(k)) for k in keys]))
    assert sorted(replies) == sorted(batch_custom_id(k) for k in keys)
    for key in keys:
        reply = replies[batch_custom_id(key)]
        assert isinstance(reply, ModelReply)
        assert reply.text == f"Draft for: {key}"


def test_a_long_system_prompt_shared_by_enough_entries_is_cached_for_an_hour(
    fake: FakeAnthropic,
) -> None:
    shared = [(custom_id(d), request(f"day {d}", LONG_SYSTEM)) for d in (5, 12, 19)]
    alone = [(custom_id(26), request("day 26", LONG_SYSTEM + " Also: be brief."))]
    short = [(custom_id(d, "x"), request(f"x {d}", "Be warm.")) for d in (5, 12, 19)]
    drafter(fake.url).submit(shared + alone + short)
    [create] = fake.batches.creates
    systems = {r["custom_id"]: r["params"]["system"] for r in create.body["requests"]}
    marked = {"type": "ephemeral", "ttl": "1h"}
    for cid, _ in shared:
        assert systems[cid] == [{"type": "text", "text": LONG_SYSTEM, "cache_control": marked}]
    assert systems[custom_id(26)] == LONG_SYSTEM + " Also: be brief."  # one use: no marker
    assert {systems[cid] for cid, _ in short} == {"Be warm."}  # too short to cache


@pytest.mark.slow
def test_the_cache_written_by_one_entry_is_read_by_the_others() -> None:
    with FakeAnthropic(count_tokens=True) as fake:
        batch = drafter(fake.url)
        shared = [(custom_id(d), request(f"day {d}", LONG_SYSTEM)) for d in (5, 12, 19)]
        replies = [r for r in batch.results(batch.submit(shared)).values()]
    usage = sorted((r.cache_creation_tokens, r.cache_read_tokens) for r in replies)  # type: ignore[union-attr]
    system_tokens = -(-len(LONG_SYSTEM) // 4)
    assert usage == [(0, system_tokens), (0, system_tokens), (system_tokens, 0)]


def test_without_cache_no_entry_is_marked(fake: FakeAnthropic) -> None:
    shared = [(custom_id(d), request(f"day {d}", LONG_SYSTEM)) for d in (5, 12, 19)]
    drafter(fake.url, cache=False).submit(shared)
    [create] = fake.batches.creates
    assert {r["params"]["system"] for r in create.body["requests"]} == {LONG_SYSTEM}


def test_the_synchronous_call_marks_a_long_system_prompt_and_sends_a_short_one_as_text(
    fake: FakeAnthropic,
) -> None:
    sync = AnthropicDrafter(api_key="test", base_url=fake.url)
    sync.draft(request(system=LONG_SYSTEM))
    sync.draft(request(system="Be warm."))
    long_call, short_call = (r.body["system"] for r in fake.requests)
    assert long_call == [
        {"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]
    assert short_call == "Be warm."
