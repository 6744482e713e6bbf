"""The Socket Mode fake speaks Slack's protocol to a plain WebSocket client."""

from __future__ import annotations

import json

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.fakes.slack_api import FakeSlack
from tests.fakes.socket_mode import APP_TOKEN, FakeSocketMode


@pytest.mark.slow
def test_urls_are_for_the_app_token_only_one_use_and_greet_with_hello() -> None:
    with FakeSlack() as web, FakeSocketMode(web, hello_delay=0.2) as link:
        client = WebClient(token="xoxb-test", base_url=web.url + "/api/", retry_handlers=[])
        with pytest.raises(SlackApiError) as refused:
            client.apps_connections_open(app_token="xoxb-test")
        assert refused.value.response["error"] == "not_allowed_token_type"
        url = client.apps_connections_open(app_token=APP_TOKEN)["url"]
        assert url.startswith("ws://127.0.0.1:")

        with connect(url) as ws:
            hello = json.loads(ws.recv(timeout=5))
            assert hello["type"] == "hello"
            envelope_id = link.send("events_api", {"type": "event_callback"})
            envelope = json.loads(ws.recv(timeout=5))
            assert (envelope["envelope_id"], envelope["type"]) == (envelope_id, "events_api")
            assert envelope["retry_attempt"] == 0
            ws.send(json.dumps({"envelope_id": envelope_id, "payload": {"ok": 1}}))
            ack = link.wait_ack(envelope_id)
            assert ack is not None and ack.payload == {"ok": 1} and ack.latency < 1
            link.refresh()
            assert json.loads(ws.recv(timeout=5))["reason"] == "refresh_requested"

        with pytest.raises(InvalidStatus), connect(url):  # a ticket is good once
            pass
