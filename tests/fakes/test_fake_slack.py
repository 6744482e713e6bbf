"""The fake Slack Web API works with the real `slack_sdk` WebClient, faults included."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.error
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RetryHandler
from slack_sdk.webhook import WebhookClient

from tests.fakes.anthropic_api import closed_port
from tests.fakes.slack_api import (
    RESPONSE_URL,
    FakeSlack,
    accept_then_hang,
    drop,
    error,
    hang_before,
    normal,
    rate_limited,
    read_calls,
    read_messages,
    write_state,
)
from tests.harness.slow_marks import starts_a_server

ROOT = Path(__file__).resolve().parents[2]
META = {"event_type": "galley_draft", "event_payload": {"draft_id": 7, "slot": "2026-12-07"}}


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeSlack]:
    with FakeSlack() as server:
        yield server


def client(url: str, *, timeout: int = 5, retry: bool = False) -> WebClient:
    """retry_handlers=[] turns off WebClient's default ConnectionErrorRetryHandler."""
    handlers: list[RetryHandler] | None = None if retry else []
    return WebClient(
        token="xoxb-test", base_url=url + "/api/", timeout=timeout, retry_handlers=handlers
    )


def post(c: WebClient, text: str = "draft", channel: str = "C1") -> str:
    return str(c.chat_postMessage(channel=channel, text=text)["ts"])


def test_default_retry_handlers_retry_connection_errors_only() -> None:
    [handler] = WebClient(token="t").retry_handlers
    assert type(handler) is ConnectionErrorRetryHandler
    assert handler.max_retry_count == 1
    assert handler.error_types_to_do_retries == [
        urllib.error.URLError,
        ConnectionResetError,
        http.client.RemoteDisconnected,
    ]
    assert WebhookClient(url="http://x").retry_handlers == [handler]  # Bolt's respond() too


def test_metadata_is_returned_only_with_include_all_metadata(fake: FakeSlack) -> None:
    c = client(fake.url)
    sent = c.chat_postMessage(
        channel="C1", text="hello", metadata=META, blocks=[{"type": "divider"}]
    )
    assert sent["ok"] and sent["channel"] == "C1"
    assert sent["message"]["metadata"] == META
    with_meta = c.conversations_history(channel="C1", include_all_metadata=True)["messages"]
    assert [(m["ts"], m["text"], m["metadata"]) for m in with_meta] == [(sent["ts"], "hello", META)]
    assert with_meta[0]["blocks"] == [{"type": "divider"}]
    without = c.conversations_history(channel="C1")["messages"]
    assert [m["ts"] for m in without] == [sent["ts"]]
    assert "metadata" not in without[0]
    [call] = fake.calls("chat.postMessage")
    assert call.headers["authorization"] == "Bearer xoxb-test"
    assert call.headers["content-type"].startswith("application/json")
    assert call.params["metadata"] == META
    assert fake.calls("conversations.history")[0].params["include_all_metadata"] == "1"
    assert fake.messages("C1")[0]["metadata"] == META


def test_form_encoded_json_fields_are_decoded(fake: FakeSlack) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*x*"}}]
    data = {
        "channel": "C2",
        "text": "t",
        "blocks": json.dumps(blocks),
        "metadata": json.dumps(META),
    }
    client(fake.url).api_call("chat.postMessage", data=data)
    [call] = fake.calls()
    assert call.headers["content-type"] == "application/x-www-form-urlencoded"
    assert call.params["blocks"] == blocks
    [message] = fake.messages("C2")
    assert (message["blocks"], message["metadata"]) == (blocks, META)


def test_history_is_newest_first_filters_oldest_and_paginates(fake: FakeSlack) -> None:
    c = client(fake.url)
    tss = [post(c, f"m{i}") for i in range(5)]
    assert tss == sorted(tss, key=Decimal) and len(set(tss)) == 5
    assert [m["text"] for m in fake.messages("C1")] == ["m0", "m1", "m2", "m3", "m4"]
    history = c.conversations_history(channel="C1")
    assert [m["text"] for m in history["messages"]] == ["m4", "m3", "m2", "m1", "m0"]
    assert history["has_more"] is False
    newer = c.conversations_history(channel="C1", oldest=tss[2])["messages"]
    assert [m["text"] for m in newer] == ["m4", "m3"]
    inclusive = c.conversations_history(channel="C1", oldest=tss[2], inclusive=True)
    assert [m["text"] for m in inclusive["messages"]] == ["m4", "m3", "m2"]
    paged = c.conversations_history(channel="C1", limit=2)  # slack_sdk follows next_cursor
    pages = [[m["text"] for m in page["messages"]] for page in paged]
    assert pages == [["m4", "m3"], ["m2", "m1"], ["m0"]]
    paged = c.conversations_history(channel="C1", limit=2, oldest=tss[0], inclusive=True)
    assert [len(page["messages"]) for page in paged] == [2, 2, 1]  # no repeats across pages
    older = c.conversations_history(channel="C1", latest=tss[1])["messages"]
    assert [m["text"] for m in older] == ["m0"]
    human = fake.add_message("C1", "a human reply", user="U2")
    assert c.conversations_history(channel="C1", limit=1)["messages"][0]["ts"] == human
    with pytest.raises(SlackApiError) as info:
        c.conversations_history(channel="C1", limit="many")  # type: ignore[arg-type]
    assert info.value.response["error"] == "invalid_arguments"
    assert c.conversations_history(channel="C9")["messages"] == []


def test_update_replaces_text_and_blocks(fake: FakeSlack) -> None:
    c = client(fake.url)
    ts = post(c, "before")
    updated = c.chat_update(channel="C1", ts=ts, text="after", blocks=[{"type": "divider"}])
    assert (updated["ok"], updated["channel"], updated["ts"]) == (True, "C1", ts)
    [message] = fake.messages("C1")
    assert (message["text"], message["blocks"]) == ("after", [{"type": "divider"}])
    with pytest.raises(SlackApiError) as info:
        c.chat_update(channel="C1", ts="1.000001", text="x")
    assert info.value.response["error"] == "message_not_found"


def test_auth_ephemerals_and_views_answer_as_slack_does_and_unknown_methods_fail(
    fake: FakeSlack,
) -> None:
    c = client(fake.url)
    auth = c.auth_test()
    assert (auth["user_id"], auth["bot_id"], auth["team_id"]) == ("UBOT", "BBOT", "T1")
    assert c.chat_postEphemeral(channel="C1", user="U1", text="psst")["message_ts"]
    assert fake.calls("chat.postEphemeral")[0].params["user"] == "U1"
    assert fake.messages("C1") == []
    view = {"type": "modal", "title": {"type": "plain_text", "text": "T"}, "blocks": []}
    opened = c.views_open(trigger_id="trig", view=view)["view"]
    assert opened["id"].startswith("V") and opened["type"] == "modal"
    assert c.views_update(view_id=opened["id"], view=view)["view"]["id"] == opened["id"]
    assert c.views_push(trigger_id="trig", view=view)["view"]["id"] != opened["id"]
    for method, err in [
        ("apps.connections.open", "not_allowed_in_fake"),
        ("a.b", "unknown_method"),
    ]:
        with pytest.raises(SlackApiError) as info:
            c.api_call(method)
        assert info.value.response["error"] == err
    with pytest.raises(SlackApiError) as info:
        WebClient(base_url=fake.url + "/api/", retry_handlers=[]).auth_test()
    assert info.value.response["error"] == "not_authed"


def test_a_user_group_lists_its_members_and_an_unknown_group_fails(fake: FakeSlack) -> None:
    fake.usergroups = {"S0EDITORS": ["U1", "U2"]}
    c = client(fake.url)
    assert c.usergroups_users_list(usergroup="S0EDITORS")["users"] == ["U1", "U2"]
    with pytest.raises(SlackApiError) as info:
        c.usergroups_users_list(usergroup="S0NOPE")
    assert info.value.response["error"] == "no_such_subteam"


def test_rate_limited_is_429_with_retry_after_and_no_effect(fake: FakeSlack) -> None:
    fake.script("chat.postMessage", rate_limited(3))
    with pytest.raises(SlackApiError) as info:
        post(client(fake.url, retry=True))  # the default handlers do not retry a 429
    assert info.value.response.status_code == 429
    assert info.value.response.headers["Retry-After"] == "3"
    assert info.value.response["error"] == "ratelimited"
    assert fake.messages("C1") == [] and len(fake.calls()) == 1


@pytest.mark.parametrize(("name", "status"), [("internal_error", 500), ("channel_not_found", 200)])
def test_a_scripted_error_fails_the_call_with_its_status_and_posts_nothing(
    fake: FakeSlack, name: str, status: int
) -> None:
    fake.script("chat.postMessage", error(name, status))
    with pytest.raises(SlackApiError) as info:
        post(client(fake.url))
    assert (info.value.response.status_code, info.value.response["error"]) == (status, name)
    assert fake.messages("C1") == []


def test_script_is_fifo_per_method_then_normal(fake: FakeSlack) -> None:
    c = client(fake.url)
    fake.script("chat.postMessage", normal(), error("e1"))
    ts = post(c, "first")
    c.chat_update(channel="C1", ts=ts, text="edited")  # another method's queue
    with pytest.raises(SlackApiError):
        post(c, "second")
    assert fake.pending("chat.postMessage") == 0
    post(c, "third")
    assert [m["text"] for m in fake.messages("C1")] == ["edited", "third"]


def test_accept_then_hang_times_out_but_the_message_is_stored(fake: FakeSlack) -> None:
    fake.script("chat.postMessage", accept_then_hang(10))
    started = time.monotonic()
    with pytest.raises(TimeoutError):  # raw builtins.TimeoutError, not URLError, not retried
        post(client(fake.url, timeout=1, retry=True))
    assert time.monotonic() - started < 5
    assert [m["text"] for m in fake.messages("C1")] == ["draft"]
    assert len(fake.calls("chat.postMessage")) == 1


def test_hang_before_times_out_with_nothing_stored(fake: FakeSlack) -> None:
    fake.script("chat.postMessage", hang_before(10))
    with pytest.raises(TimeoutError):
        post(client(fake.url, timeout=1))
    assert fake.messages("C1") == [] and len(fake.calls()) == 1


def test_drop_raises_remote_disconnected_and_the_default_client_resends(fake: FakeSlack) -> None:
    fake.script("chat.postMessage", drop(), drop())
    with pytest.raises(http.client.RemoteDisconnected) as info:
        post(client(fake.url))
    assert isinstance(info.value, ConnectionResetError)
    assert not isinstance(info.value, urllib.error.URLError)
    assert fake.messages("C1") == [] and len(fake.calls()) == 1
    post(client(fake.url, retry=True))  # dropped once more, then silently re-sent: ok
    assert len(fake.calls("chat.postMessage")) == 3
    assert len(fake.messages("C1")) == 1


def test_closed_port_raises_url_error_with_connection_refused() -> None:
    with pytest.raises(urllib.error.URLError) as info:
        client(f"http://127.0.0.1:{closed_port()}").auth_test()
    assert isinstance(info.value.reason, ConnectionRefusedError)


@pytest.mark.slow
def test_stop_interrupts_a_hang() -> None:
    fake = FakeSlack().start()
    fake.script("chat.postMessage", accept_then_hang(60))
    errors: list[BaseException] = []

    def call() -> None:
        try:
            post(client(fake.url, timeout=60))
        except Exception as exc:
            errors.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    deadline = time.monotonic() + 5
    while not fake.messages("C1") and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    fake.stop()
    assert time.monotonic() - started < 2
    worker.join(timeout=5)
    assert not worker.is_alive()
    assert isinstance(errors[0], http.client.RemoteDisconnected)


def test_enforced_rate_limit_is_per_channel(fake: FakeSlack) -> None:
    fake.enforce_rate_limit(per_channel_seconds=0.5)
    c = client(fake.url)
    post(c)
    with pytest.raises(SlackApiError) as info:
        post(c)
    assert info.value.response.status_code == 429
    assert info.value.response.headers["Retry-After"] == "1"
    post(c, channel="C2")
    time.sleep(0.55)
    post(c)
    assert len(fake.messages("C1")) == 2
    fake.enforce_rate_limit(None)
    post(c)


def test_response_url_accepts_webhook_posts(fake: FakeSlack) -> None:
    response = WebhookClient(fake.response_url("cmd1")).send(text="x", response_type="ephemeral")
    assert (response.status_code, json.loads(response.body)) == (200, {"ok": True})
    [call] = fake.calls(RESPONSE_URL)
    assert call.path == "/response/cmd1"
    assert call.params == {"text": "x", "response_type": "ephemeral"}


def test_concurrent_posts_get_unique_increasing_ts(fake: FakeSlack) -> None:
    c = client(fake.url)
    with ThreadPoolExecutor(max_workers=10) as pool:
        tss = list(pool.map(lambda i: post(c, f"m{i}"), range(30)))
    assert len(set(tss)) == 30
    stored = [m["ts"] for m in fake.messages("C1")]
    assert stored == sorted(stored, key=Decimal) and sorted(stored) == sorted(tss)


def start_subprocess(state: Path, port: int = 0) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.slack_api", "--port", str(port), "--state-file", state],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


@pytest.mark.slow
def test_the_subprocess_fake_obeys_its_state_file_and_keeps_history_across_a_restart(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.json"
    write_state(state, script={"chat.postMessage": [error("internal_error", 500)]})
    write_state(state, usergroups={"S0EDITORS": ["U7"]}, rate_limit=None)
    proc, url = start_subprocess(state)
    try:
        assert url.startswith("http://127.0.0.1:")
        c = client(url)
        with pytest.raises(SlackApiError):
            post(c, "first")
        ts = c.chat_postMessage(channel="C1", text="second", metadata=META)["ts"]
        assert c.usergroups_users_list(usergroup="S0EDITORS")["users"] == ["U7"]
        write_state(state, rate_limit=30)
        with pytest.raises(SlackApiError) as info:
            post(c, "third")
        assert info.value.response.headers["Retry-After"] in {"29", "30"}
        logged = read_calls(state)
        assert [r["method"] for r in logged] == ["chat.postMessage"] * 2 + [
            "usergroups.users.list",
            "chat.postMessage",
        ]
        assert logged[0]["params"]["text"] == "first" and isinstance(logged[0]["at"], float)
        assert read_messages(state)["C1"][0]["metadata"] == META
        assert json.loads(state.read_text())["script"] == {"chat.postMessage": []}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    proc, url = start_subprocess(state)  # a restart keeps the channel history
    try:
        c = client(url)
        write_state(state, rate_limit=None)
        later = post(c, "after restart")
        texts = [m["text"] for m in c.conversations_history(channel="C1")["messages"]]
        assert texts == ["after restart", "second"]
        assert Decimal(later) > Decimal(ts)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_replies_list_the_parent_then_its_replies_oldest_first_a_page_at_a_time(
    fake: FakeSlack,
) -> None:
    c = client(fake.url)
    parent = post(c, "parent")
    post(c, "elsewhere")
    sent = [
        str(c.chat_postMessage(channel="C1", text=f"reply {n}", thread_ts=parent)["ts"])
        for n in range(3)
    ]

    whole = c.conversations_replies(channel="C1", ts=parent)
    first = c.conversations_replies(channel="C1", ts=parent, limit=2)
    rest = c.conversations_replies(
        channel="C1", ts=parent, limit=2, cursor=first["response_metadata"]["next_cursor"]
    )

    assert [m["ts"] for m in whole["messages"]] == [parent, *sent]
    assert [m["text"] for m in whole["messages"]] == ["parent", "reply 0", "reply 1", "reply 2"]
    assert first["has_more"] and not rest["has_more"]
    assert [m["ts"] for m in first["messages"] + rest["messages"]] == [parent, *sent]
    with pytest.raises(SlackApiError) as missing:
        c.conversations_replies(channel="C1", ts="1.000001")
    assert missing.value.response["error"] == "thread_not_found"
