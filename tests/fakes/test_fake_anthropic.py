"""The fake Anthropic API works with the real `anthropic` SDK, faults included."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
import httpx2
import pytest

from tests.fakes.anthropic_api import (
    FakeAnthropic,
    closed_port,
    drop,
    hang,
    ok,
    read_requests,
    status,
    write_script,
)
from tests.harness.slow_marks import starts_a_server

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = [{"role": "user", "content": "write about boats"}]


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def client(url: str, *, read: float = 5.0, retries: int = 0) -> anthropic.Anthropic:
    timeout = anthropic.Timeout(5.0, read=read)
    return anthropic.Anthropic(api_key="test", base_url=url, max_retries=retries, timeout=timeout)


def create(c: anthropic.Anthropic, text: str = "write about boats") -> anthropic.types.Message:
    return c.messages.create(
        model="claude-test", max_tokens=100, messages=[{"role": "user", "content": text}]
    )


def text_of(message: anthropic.types.Message) -> str:
    block = message.content[0]
    assert isinstance(block, anthropic.types.TextBlock)
    return block.text


def test_normal_call_returns_text_usage_and_request_id(fake: FakeAnthropic) -> None:
    message = create(client(fake.url))
    assert message.content[0].type == "text"
    assert text_of(message) == "Draft for: write about boats"
    assert message.model == "claude-test"
    assert message.stop_reason == "end_turn"
    assert message.id.startswith("msg_")
    assert message.usage.input_tokens > 0
    assert message.usage.output_tokens > 0
    assert message.usage.cache_read_input_tokens == 0
    assert message._request_id == "req_1"
    [req] = fake.requests
    assert req.path == "/v1/messages"
    assert req.method == "POST"
    assert req.headers["authorization"] == "Bearer test"  # SDK 2.x sends api_key this way
    assert "anthropic-version" in req.headers
    assert req.body["messages"] == MESSAGES
    assert req.body["max_tokens"] == 100
    assert req.at <= time.time()


@pytest.mark.slow
def test_text_usage_and_delay_are_answered_as_configured_or_scripted() -> None:
    with FakeAnthropic(text="fixed", usage={"input_tokens": 7, "output_tokens": 9}) as fake:
        c = client(fake.url)
        first = create(c)
        assert text_of(first) == "fixed"
        assert (first.usage.input_tokens, first.usage.output_tokens) == (7, 9)
        fake.script(ok(text="scripted", delay=0.3))
        started = time.monotonic()
        assert text_of(create(c)) == "scripted"
        assert time.monotonic() - started >= 0.3
        fake.delay = 0.2
        started = time.monotonic()
        create(c)
        assert time.monotonic() - started >= 0.2


def test_list_content_uses_last_user_text_block(fake: FakeAnthropic) -> None:
    message = client(fake.url).messages.create(
        model="claude-test",
        max_tokens=10,
        system="be brief",
        messages=[
            {"role": "user", "content": "old"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "new prompt"}]},
        ],
    )
    assert text_of(message) == "Draft for: new prompt"


def test_rate_limit_carries_retry_after(fake: FakeAnthropic) -> None:
    fake.script(status(429, headers={"retry-after": "1"}))
    with pytest.raises(anthropic.RateLimitError) as info:
        create(client(fake.url))
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "1"
    assert info.value.type == "rate_limit_error"
    assert info.value.request_id == "req_1"
    assert info.value.__cause__ is None


@pytest.mark.parametrize(
    ("code", "exc", "err_type"),
    [
        (400, anthropic.BadRequestError, "invalid_request_error"),
        (401, anthropic.AuthenticationError, "authentication_error"),
        (403, anthropic.PermissionDeniedError, "permission_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (503, anthropic.ServiceUnavailableError, "api_error"),
        (529, anthropic.OverloadedError, "overloaded_error"),
    ],
)
def test_status_errors_map_to_sdk_classes(
    fake: FakeAnthropic, code: int, exc: type[anthropic.APIStatusError], err_type: str
) -> None:
    fake.script(status(code))
    with pytest.raises(exc) as info:
        create(client(fake.url))
    assert type(info.value) is exc
    assert info.value.status_code == code
    assert info.value.type == err_type
    assert len(fake.requests) == 1


def test_overloaded_is_an_internal_server_error() -> None:
    assert issubclass(anthropic.OverloadedError, anthropic.InternalServerError)


def test_script_is_fifo_then_normal(fake: FakeAnthropic) -> None:
    fake.script(status(429, headers={"retry-after": "0"}), ok(text="hello"))
    assert text_of(create(client(fake.url, retries=1))) == "hello"
    assert len(fake.requests) == 2
    assert fake.pending == 0
    assert text_of(create(client(fake.url))).startswith("Draft for: ")


def test_hang_raises_timeout_caused_by_read_timeout(fake: FakeAnthropic) -> None:
    fake.script(hang(10))
    started = time.monotonic()
    with pytest.raises(anthropic.APITimeoutError) as info:
        create(client(fake.url, read=0.5))
    assert time.monotonic() - started < 5
    assert isinstance(info.value.__cause__, httpx2.ReadTimeout)
    assert len(fake.requests) == 1


def test_drop_raises_connection_error_not_timeout(fake: FakeAnthropic) -> None:
    fake.script(drop())
    with pytest.raises(anthropic.APIConnectionError) as info:
        create(client(fake.url))
    assert not isinstance(info.value, anthropic.APITimeoutError)
    assert isinstance(info.value.__cause__, httpx2.RemoteProtocolError)
    assert len(fake.requests) == 1


def test_closed_port_raises_connection_error_caused_by_connect_error() -> None:
    with pytest.raises(anthropic.APIConnectionError) as info:
        create(client(f"http://127.0.0.1:{closed_port()}"))
    assert not isinstance(info.value, anthropic.APITimeoutError)
    assert isinstance(info.value.__cause__, httpx2.ConnectError)


@pytest.mark.slow
def test_stop_does_not_wait_for_a_hang() -> None:
    fake = FakeAnthropic().start()
    fake.script(hang(60))
    errors: list[BaseException] = []

    def call() -> None:
        try:
            create(client(fake.url, read=60))
        except anthropic.APIError as exc:
            errors.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    deadline = time.monotonic() + 5
    while not fake.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    fake.stop()
    assert time.monotonic() - started < 2
    worker.join(timeout=5)
    assert not worker.is_alive()
    assert isinstance(errors[0], anthropic.APIConnectionError)


def test_invalid_body_is_recorded_then_rejected(fake: FakeAnthropic) -> None:
    request = urllib.request.Request(
        f"{fake.url}/v1/messages",
        data=json.dumps({"model": "m", "messages": MESSAGES}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 400
    assert "max_tokens" in json.loads(info.value.read())["error"]["message"]
    assert fake.requests[0].body == {"model": "m", "messages": MESSAGES}


@pytest.mark.slow
def test_state_file_script_is_consumed_once_under_concurrency(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    write_script(state, [status(500)] * 5)
    with FakeAnthropic(state_file=state) as fake:
        c = client(fake.url)

        def call(i: int) -> str:
            try:
                return text_of(create(c, f"p{i}"))
            except anthropic.InternalServerError:
                return "500"

        with ThreadPoolExecutor(max_workers=10) as pool:
            results = list(pool.map(call, range(10)))
    assert results.count("500") == 5
    assert len(read_requests(state)) == 10
    assert json.loads(state.read_text())["script"] == []


@pytest.mark.slow
def test_the_subprocess_fake_follows_its_state_file_script_and_logs_every_request(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.anthropic_api", "--port", "0", "--state-file", state],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        write_script(state, [status(500)])
        c = client(url)
        with pytest.raises(anthropic.InternalServerError):
            create(c, "first")
        assert text_of(create(c, "second")) == "Draft for: second"
        logged = read_requests(state)
        assert [r["path"] for r in logged] == ["/v1/messages", "/v1/messages"]
        assert [r["body"]["messages"][0]["content"] for r in logged] == ["first", "second"]
        assert all(isinstance(r["at"], float) for r in logged)
        write_script(state, [], text="slow", delay=0.2)
        assert text_of(create(c)) == "slow"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


TOOL = {
    "name": "submit_post",
    "input_schema": {
        "type": "object",
        "properties": {
            "versions": {
                "type": "object",
                "properties": {"a": {"type": "array", "items": {"type": "string"}}},
                "required": ["a"],
            }
        },
        "required": ["versions"],
    },
}


def test_a_forced_tool_call_is_answered_with_one_tool_use_block(fake: FakeAnthropic) -> None:
    fake.script(ok(text=json.dumps({"versions": {"a": ["one", "two"]}})), ok(text="plain"))
    c = client(fake.url)
    answers = [
        c.messages.create(
            model="claude-test",
            max_tokens=100,
            messages=MESSAGES,
            tools=[TOOL],  # type: ignore[list-item]
            tool_choice={"type": "tool", "name": "submit_post"},
        )
        for _ in range(2)
    ]
    blocks = [answer.content[0] for answer in answers]
    assert all(isinstance(b, anthropic.types.ToolUseBlock) for b in blocks)
    assert [b.input for b in blocks] == [  # type: ignore[union-attr]
        {"versions": {"a": ["one", "two"]}},
        {"versions": {"a": ["plain"]}},  # a plain scripted text fills the schema
    ]
    assert {answer.stop_reason for answer in answers} == {"tool_use"}


def test_a_tool_choice_naming_no_tool_is_refused_as_the_api_does(fake: FakeAnthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="not found in tools"):
        client(fake.url).messages.create(
            model="claude-test",
            max_tokens=100,
            messages=MESSAGES,
            tools=[TOOL],  # type: ignore[list-item]
            tool_choice={"type": "tool", "name": "other"},
        )


def image_message(media_type: str) -> list[dict[str, object]]:
    source = {"type": "base64", "media_type": media_type, "data": "aGVsbG8="}
    image = {"type": "image", "source": source}
    return [{"role": "user", "content": [image, {"type": "text", "text": "describe it"}]}]


def test_image_blocks_of_the_four_media_types_are_read_and_others_refused_as_the_api_does(
    fake: FakeAnthropic,
) -> None:
    c = client(fake.url)
    for media_type in ("image/jpeg", "image/png", "image/gif", "image/webp"):
        answer = c.messages.create(
            model="claude-test", max_tokens=10, messages=image_message(media_type)
        )
        assert text_of(answer) == "Draft for: describe it"
    with pytest.raises(anthropic.BadRequestError) as refused:
        c.messages.create(model="claude-test", max_tokens=10, messages=image_message("image/heic"))
    assert refused.value.status_code == 400
    assert refused.value.body["error"]["message"] == (  # type: ignore[index]
        "messages.0.content.0.image.source.base64.media_type: Input should be "
        "'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
    )
