"""The fake Message Batches API works with the real `anthropic` SDK, faults included."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types.messages import MessageBatchIndividualResponse

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.anthropic_batches import (
    accept,
    accept_then_drop,
    accept_then_hang,
    canceled,
    errored,
    expired,
    read_batches,
    status,
    succeeded,
    write_state,
)
from tests.harness.slow_marks import starts_a_server


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def client(url: str, *, read: float = 5.0) -> anthropic.Anthropic:
    timeout = anthropic.Timeout(5.0, read=read)
    return anthropic.Anthropic(api_key="test", base_url=url, max_retries=0, timeout=timeout)


def entry(custom_id: str, prompt: str | None = None, **params: Any) -> dict[str, Any]:
    body = {
        "model": "claude-test",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": prompt or f"write {custom_id}"}],
        **params,
    }
    return {"custom_id": custom_id, "params": body}


def create(c: anthropic.Anthropic, *custom_ids: str) -> str:
    return c.messages.batches.create(requests=[entry(i) for i in custom_ids]).id  # type: ignore[misc]


def results(c: anthropic.Anthropic, batch_id: str) -> dict[str, MessageBatchIndividualResponse]:
    return {e.custom_id: e for e in c.messages.batches.results(batch_id)}


def test_a_batch_is_created_in_progress_and_ends_with_one_result_per_entry(
    fake: FakeAnthropic,
) -> None:
    c = client(fake.url)
    created = c.messages.batches.create(requests=[entry("a"), entry("b")])  # type: ignore[list-item]
    assert created.id.startswith("msgbatch_")
    assert created.processing_status == "in_progress"
    assert created.request_counts.processing == 2
    assert created.results_url is None
    assert created.expires_at.timestamp() - created.created_at.timestamp() == 24 * 3600
    ended = c.messages.batches.retrieve(created.id)
    assert ended.processing_status == "ended"
    assert ended.request_counts.succeeded == 2
    assert ended.request_counts.processing == 0
    assert ended.ended_at is not None
    assert ended.results_url == f"{fake.url}/v1/messages/batches/{created.id}/results"
    found = results(c, created.id)
    assert set(found) == {"a", "b"}
    result = found["a"].result
    assert result.type == "succeeded"
    block = result.message.content[0]
    assert block.type == "text"
    assert block.text == "Draft for: write a"
    assert result.message.usage.output_tokens > 0
    [create_request] = fake.batches.creates
    assert create_request.body["requests"][0]["custom_id"] == "a"
    assert fake.batches.entries_sent == ["a", "b"]


@pytest.mark.parametrize(
    "custom_ids",
    [["ok", "not ok"], ["x" * 65], [""], ["a|b"], ["same", "same"]],
)
def test_a_bad_or_repeated_custom_id_refuses_the_whole_batch(
    fake: FakeAnthropic, custom_ids: list[str]
) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        create(client(fake.url), *custom_ids)
    assert info.value.type == "invalid_request_error"
    assert "custom_id" in info.value.message
    assert fake.batches.created == []
    assert len(fake.batches.creates) == 1


def test_the_longest_custom_id_and_its_whole_alphabet_are_accepted(fake: FakeAnthropic) -> None:
    custom_id = ("Az09_-" * 11)[:64]
    assert set(results(client(fake.url), create(client(fake.url), custom_id))) == {custom_id}


def test_results_come_back_in_some_other_order_than_the_requests(fake: FakeAnthropic) -> None:
    c = client(fake.url)
    custom_ids = [f"e{i:02d}" for i in range(30)]
    batch_id = create(c, *custom_ids)
    c.messages.batches.retrieve(batch_id)
    order = [e.custom_id for e in c.messages.batches.results(batch_id)]
    assert sorted(order) == custom_ids
    assert order != custom_ids


def test_listing_is_newest_first_and_pages_both_ways(fake: FakeAnthropic) -> None:
    c = client(fake.url)
    ids = [create(c, f"c{i}") for i in range(5)]
    newest_first = ids[::-1]
    page = c.messages.batches.list(limit=2)
    assert [b.id for b in page.data] == newest_first[:2]
    assert (page.has_more, page.first_id, page.last_id) == (True, ids[4], ids[3])
    after = c.messages.batches.list(limit=2, after_id=ids[3])
    assert [b.id for b in after.data] == newest_first[2:4]
    before = c.messages.batches.list(limit=2, before_id=ids[0])
    assert [b.id for b in before.data] == newest_first[2:4]
    assert before.has_more is True
    last = c.messages.batches.list(limit=2, after_id=ids[1])
    assert ([b.id for b in last.data], last.has_more) == ([ids[0]], False)
    assert [b.id for b in c.messages.batches.list(limit=2)] == newest_first  # SDK pages on


@pytest.mark.parametrize("limit", [0, 1001])
def test_a_list_limit_out_of_range_is_refused(fake: FakeAnthropic, limit: int) -> None:
    with pytest.raises(anthropic.BadRequestError):
        client(fake.url).messages.batches.list(limit=limit)


def test_slow_processing_answers_in_progress_for_the_scripted_looks(fake: FakeAnthropic) -> None:
    c = client(fake.url)
    fake.batches.script(accept(looks=2))
    batch_id = create(c, "slow")
    states = [c.messages.batches.retrieve(batch_id).processing_status for _ in range(3)]
    assert states == ["in_progress", "in_progress", "ended"]


def test_a_list_that_shows_a_batch_counts_as_a_look(fake: FakeAnthropic) -> None:
    c = client(fake.url)
    fake.batches.looks = 1
    batch_id = create(c, "listed")
    assert [b.processing_status for b in c.messages.batches.list()] == ["in_progress"]
    assert c.messages.batches.retrieve(batch_id).processing_status == "ended"


def test_a_held_batch_ends_only_once_released(fake: FakeAnthropic) -> None:
    c = client(fake.url)
    fake.batches.hold = True
    held, other = create(c, "h"), create(c, "o")
    for _ in range(3):
        assert c.messages.batches.retrieve(held).processing_status == "in_progress"
    fake.batches.release(held)
    assert c.messages.batches.retrieve(held).processing_status == "ended"
    assert c.messages.batches.retrieve(other).processing_status == "in_progress"
    fake.batches.release()
    assert c.messages.batches.retrieve(other).processing_status == "ended"


def test_scripted_entries_come_back_errored_expired_canceled_or_with_their_text(
    fake: FakeAnthropic,
) -> None:
    c = client(fake.url)
    fake.batches.script_entries(
        {
            "err": errored("overloaded_error", "busy"),
            "exp": expired(),
            "can": canceled(),
            "txt": succeeded("scripted text"),
        }
    )
    batch_id = create(c, "err", "exp", "can", "txt", "plain")
    counts = c.messages.batches.retrieve(batch_id).request_counts
    assert (counts.succeeded, counts.errored, counts.expired, counts.canceled) == (2, 1, 1, 1)
    found = results(c, batch_id)
    err = found["err"].result
    assert err.type == "errored"
    assert (err.error.error.type, err.error.error.message) == ("overloaded_error", "busy")
    assert found["exp"].result.type == "expired"
    assert found["can"].result.type == "canceled"
    txt = found["txt"].result
    assert txt.type == "succeeded"
    assert txt.message.content[0].type == "text"
    assert txt.message.content[0].text == "scripted text"


def test_an_entry_with_bad_params_errors_when_the_batch_ends_not_at_create(
    fake: FakeAnthropic,
) -> None:
    c = client(fake.url)
    bad = {"custom_id": "bad", "params": {"model": "m", "messages": []}}
    batch_id = c.messages.batches.create(requests=[entry("good"), bad]).id  # type: ignore[list-item]
    found = results(c, batch_id)
    result = found["bad"].result
    assert result.type == "errored"
    assert result.error.error.type == "invalid_request_error"
    assert found["good"].result.type == "succeeded"


def test_an_expired_batch_returns_its_unscripted_entries_expired(fake: FakeAnthropic) -> None:
    c = client(fake.url)
    fake.batches.hold = True
    fake.batches.script_entries({"done": succeeded()})
    batch_id = create(c, "done", "late")
    fake.batches.expire(batch_id)
    assert c.messages.batches.retrieve(batch_id).request_counts.expired == 1
    assert {k: e.result.type for k, e in results(c, batch_id).items()} == {
        "done": "succeeded",
        "late": "expired",
    }


def test_a_cancelled_batch_is_canceling_then_ends_with_its_entries_canceled(
    fake: FakeAnthropic,
) -> None:
    c = client(fake.url)
    fake.batches.hold = True
    batch_id = create(c, "x", "y")
    cancelling = c.messages.batches.cancel(batch_id)
    assert cancelling.processing_status == "canceling"
    assert cancelling.cancel_initiated_at is not None
    ended = c.messages.batches.retrieve(batch_id)
    assert (ended.processing_status, ended.request_counts.canceled) == ("ended", 2)


def test_overloaded_on_create_creates_nothing(fake: FakeAnthropic) -> None:
    fake.batches.script(status(529, headers={"retry-after": "3"}))
    with pytest.raises(anthropic.OverloadedError) as info:
        create(client(fake.url), "a")
    assert info.value.response.headers["retry-after"] == "3"
    assert fake.batches.created == []
    assert fake.batches.entries_sent == ["a"]


def test_a_lost_create_answer_leaves_the_batch_created(fake: FakeAnthropic) -> None:
    fake.batches.script(accept_then_drop(), accept_then_hang(10))
    with pytest.raises(anthropic.APIConnectionError) as dropped:
        create(client(fake.url), "a")
    assert not isinstance(dropped.value, anthropic.APITimeoutError)
    started = time.monotonic()
    with pytest.raises(anthropic.APITimeoutError):
        create(client(fake.url, read=0.5), "b")
    assert time.monotonic() - started < 5
    assert [b.requests[0]["custom_id"] for b in fake.batches.created] == ["a", "b"]


def test_an_unknown_batch_is_not_found(fake: FakeAnthropic) -> None:
    with pytest.raises(anthropic.NotFoundError):
        client(fake.url).messages.batches.retrieve("msgbatch_nope")


def test_results_of_a_batch_in_progress_are_not_served(fake: FakeAnthropic) -> None:
    fake.batches.hold = True
    batch_id = create(client(fake.url), "a")
    url = f"{fake.url}/v1/messages/batches/{batch_id}/results"
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(url, timeout=5)
    assert info.value.code == 404
    with pytest.raises(anthropic.AnthropicError, match="results_url"):
        client(fake.url).messages.batches.results(batch_id)


def test_every_request_is_recorded_gets_included(fake: FakeAnthropic) -> None:
    c = client(fake.url)
    batch_id = create(c, "a")
    c.messages.batches.retrieve(batch_id)
    list(c.messages.batches.results(batch_id))
    c.messages.batches.list()
    assert [(r.method, r.path.split("?")[0]) for r in fake.requests] == [
        ("POST", "/v1/messages/batches"),
        ("GET", f"/v1/messages/batches/{batch_id}"),
        ("GET", f"/v1/messages/batches/{batch_id}"),  # the SDK's results() retrieves first
        ("GET", f"/v1/messages/batches/{batch_id}/results"),
        ("GET", "/v1/messages/batches"),
    ]


@pytest.mark.slow
def test_entries_sharing_a_marked_system_prompt_write_the_cache_once_then_read_it() -> None:
    system = [
        {
            "type": "text",
            "text": "house style " * 500,
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        }
    ]
    with FakeAnthropic(count_tokens=True) as fake:
        c = client(fake.url)
        requests = [entry(f"e{i}", system=system) for i in range(3)]
        batch_id = c.messages.batches.create(requests=requests).id  # type: ignore[arg-type]
        usages = {k: e.result.message.usage for k, e in results(c, batch_id).items()}  # type: ignore[union-attr]
    assert [u.cache_creation_input_tokens for _, u in sorted(usages.items())] == [1500, 0, 0]
    assert [u.cache_read_input_tokens for _, u in sorted(usages.items())] == [0, 1500, 1500]
    assert usages["e0"].cache_creation is not None
    assert usages["e0"].cache_creation.ephemeral_1h_input_tokens == 1500
    assert {u.service_tier for u in usages.values()} == {"batch"}
    assert {u.input_tokens for u in usages.values()} == {2}  # "write eN": 8 characters


@pytest.mark.slow
def test_a_marked_prompt_below_the_minimum_is_not_cached() -> None:
    system = [{"type": "text", "text": "short", "cache_control": {"type": "ephemeral"}}]
    with FakeAnthropic(count_tokens=True) as fake:
        c = client(fake.url)
        batch_id = c.messages.batches.create(requests=[entry("a", system=system)]).id  # type: ignore[list-item]
        [found] = results(c, batch_id).values()
    assert found.result.type == "succeeded"
    usage = found.result.message.usage
    assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)


@pytest.mark.slow
def test_the_state_file_scripts_creates_and_keeps_batches_across_a_restart(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.json"
    write_state(
        state,
        batch_script=[status(529)],
        batch_hold=True,
        entry_results={"b": errored("api_error")},
    )
    with FakeAnthropic(state_file=state) as fake:
        c = client(fake.url)
        with pytest.raises(anthropic.OverloadedError):
            create(c, "a")
        batch_id = create(c, "a", "b")
        assert c.messages.batches.retrieve(batch_id).processing_status == "in_progress"
    assert [b["id"] for b in read_batches(state)] == [batch_id]
    write_state(state, batch_hold=False)
    with FakeAnthropic(state_file=state) as restarted:
        c = client(restarted.url)
        assert c.messages.batches.retrieve(batch_id).processing_status == "ended"
        assert {k: e.result.type for k, e in results(c, batch_id).items()} == {
            "a": "succeeded",
            "b": "errored",
        }
    logged = [json.loads(line)["path"] for line in Path(f"{state}.log").read_text().splitlines()]
    assert logged.count("/v1/messages/batches") == 2
    assert json.loads(state.read_text())["batch_script"] == []
    assert read_batches(state)[0]["status"] == "ended"
