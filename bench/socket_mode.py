"""Socket Mode figures, against the local Socket Mode fake (tests/fakes/socket_mode.py).

1. Reconnect: for each of slack_sdk's Socket Mode clients (builtin, websocket_client,
   aiohttp, websockets) and for Galley's choice (`bot.socket_link`), the seconds from a
   fault to a new greeted connection, and the CPU the process burned meanwhile (percent
   of one core). Faults: reset (RST), close frame, refresh (`disconnect`), TCP EOF
   without a close frame, a silently half-open link. Capped at --cap seconds.
2. Ack latency p50/p99 of envelopes (Approve clicks) to a real Bot in Socket Mode while
   every drafting thread is blocked on a slow model (goal: p99 under 300 ms).

    .venv/bin/python -m bench.socket_mode [--clients builtin,...] [--faults reset,...]
        [--cap 70] [--clicks 200] [--burst 50] [--skip-reconnect] [--skip-acks]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import logging
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from slack_sdk import WebClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bench.slack_review import MONDAYS
from bot.block_kit import button_value
from bot.blocks import ACTION_APPROVE
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.fakes.socket_mode import APP_TOKEN, FakeSocketMode
from tests.harness import bots
from tests.harness.bots import operator
from tests.harness.slack_requests import block_actions

FAULTS: dict[str, Callable[[FakeSocketMode], None]] = {
    "reset": FakeSocketMode.reset,
    "close": FakeSocketMode.close,
    "refresh": FakeSocketMode.refresh,
    "eof": FakeSocketMode.eof,
    "half-open": FakeSocketMode.blackhole,
}
# builtin-bolt: the builtin client as Bolt's SocketModeHandler configures it (pinging
# every 10 s), which is what `galley run` used before it chose its own
CLIENTS = ("builtin", "builtin-bolt", "websocket_client", "aiohttp", "websockets", "galley")


class SyncClient:
    """Runs one of slack_sdk's clients (sync, or async on its own loop thread)."""

    def __init__(self, name: str, slack_url: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        if name in ("aiohttp", "websockets"):
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, daemon=True).start()
            self.client = self._run(self._async_client(name, slack_url))
        else:
            self.client = self._sync_client(name, slack_url)

    @staticmethod
    def _sync_client(name: str, slack_url: str) -> Any:
        web = WebClient(token="xoxb-bench", base_url=slack_url + "/api/", retry_handlers=[])
        if name in ("builtin", "builtin-bolt"):
            from slack_sdk.socket_mode.builtin import SocketModeClient

            ping = 10.0 if name == "builtin-bolt" else 5.0  # Bolt's default, the SDK's
            client: Any = SocketModeClient(app_token=APP_TOKEN, web_client=web, ping_interval=ping)
        elif name == "websocket_client":
            from slack_sdk.socket_mode.websocket_client import SocketModeClient as WsClient

            client = WsClient(app_token=APP_TOKEN, web_client=web)
        else:
            from bot.socket_link import socket_mode_client

            client = socket_mode_client(APP_TOKEN, web)

        def ack(c: Any, req: SocketModeRequest) -> None:
            c.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

        client.socket_mode_request_listeners.append(ack)
        return client

    @staticmethod
    async def _async_client(name: str, slack_url: str) -> Any:
        from slack_sdk.web.async_client import AsyncWebClient  # needs aiohttp

        web = AsyncWebClient(token="xoxb-bench", base_url=slack_url + "/api/")
        if name == "aiohttp":
            from slack_sdk.socket_mode.aiohttp import SocketModeClient as AioClient

            client: Any = AioClient(app_token=APP_TOKEN, web_client=web)
        else:
            from slack_sdk.socket_mode.websockets import SocketModeClient as WsClient

            client = WsClient(app_token=APP_TOKEN, web_client=web)

        async def ack(c: Any, req: SocketModeRequest) -> None:
            await c.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

        client.socket_mode_request_listeners.append(ack)
        return client

    def _run(self, coro: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def connect(self) -> None:
        if self._loop is not None:
            self._run(self.client.connect())
        else:
            self.client.connect()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._loop is not None:
                self._run(self.client.close())
                self._loop.call_soon_threadsafe(self._loop.stop)
            else:
                self.client.close()


@contextlib.contextmanager
def connected(name: str) -> Iterator[tuple[FakeSocketMode, SyncClient]]:
    with FakeSlack() as slack, FakeSocketMode(slack, refresh_grace=2.0) as socket_fake:
        client = SyncClient(name, slack.url)
        try:
            client.connect()
            socket_fake.wait_connected(1, timeout=15)
            yield socket_fake, client
        finally:
            client.close()


def reconnect(name: str, fault: str, cap: float) -> tuple[float | None, float]:
    """(seconds to a new greeted connection or None past `cap`, CPU % of one core)."""
    with connected(name) as (socket_fake, _client):
        time.sleep(1.0)  # idle on a healthy link first
        before = socket_fake.last_connection()
        cpu0, wall0 = time.process_time(), time.monotonic()
        FAULTS[fault](socket_fake)
        try:
            seconds: float | None = socket_fake.wait_connected(1, timeout=cap, after=before)
        except TimeoutError:
            seconds = None
        time.sleep(max(0.0, 3.0 - (time.monotonic() - wall0)))  # CPU over at least 3 s
        cpu = 100 * (time.process_time() - cpu0) / max(time.monotonic() - wall0, 1e-6)
        envelope = socket_fake.send("events_api", {"type": "event_callback"}, wait=5)
        if socket_fake.wait_ack(envelope, timeout=5) is None:
            seconds = None  # connected but not answering is not reconnected
        return seconds, cpu


def reconnect_table(clients: list[str], faults: list[str], cap: float) -> None:
    print(f"\nreconnect after a fault: seconds (CPU % of one core meanwhile), cap {cap:.0f} s")
    print(f"{'client':18}" + "".join(f"{f:>18}" for f in faults))
    for name in clients:
        cells = []
        for fault in faults:
            try:
                seconds, cpu = reconnect(name, fault, cap)
                shown = f">{cap:.0f}" if seconds is None else f"{seconds:.1f}"
                cells.append(f"{shown} s ({cpu:.0f}%)")
            except Exception as exc:
                cells.append(f"error {type(exc).__name__}")
        print(f"{name:18}" + "".join(f"{c:>18}" for c in cells), flush=True)


def ack_latency_report(clicks: int, burst: int) -> None:
    """Approve clicks (by someone who may not approve, so every one runs the whole
    listener and changes nothing) to a real Bot in Socket Mode, all drafting threads
    blocked on a 60 s model: one at a time, then `burst` sent at once."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeSlack() as slack,
        FakeSocketMode(slack) as link,
        FakeAnthropic() as model,
    ):
        config = Path(tmp) / "galley.toml"
        text = config_text(pending_limit=1000, claim_lease="10m", model_timeout="5m")
        people = 'review_channel = "C0REVIEW"\napprovers = ["U0EDITOR"]'
        config.write_text(text.replace('review_channel = "C0REVIEW"', people))
        bot = bots.start_bot(
            config=config,
            db_url=f"sqlite:///{Path(tmp) / 'bench.db'}",
            anthropic_url=model.url,
            slack_url=slack.url,
            secret="unused-in-socket-mode",
            app_token=APP_TOKEN,
        )
        try:
            link.wait_connected(1, timeout=15)
            result = operator(bot).draft("weekly-update", MONDAYS[0])
            bot.sync_slack()
            model.delay = 60.0  # every drafting thread now waits on a slow model
            recipe = bot.core.recipe("weekly-update")
            for wall in MONDAYS[1:6]:
                slot = bot.core.resolve_slot(recipe, wall)
                bot.host.submit(bot.core.drafting.draft_slot, recipe, slot, manual=True)
            while len(model.requests) < 5:  # four drafting threads busy, one queued
                time.sleep(0.05)
            value = button_value(result.key or "", 1)

            def click(n: int) -> str:
                payload = block_actions(
                    user=f"U{n:05d}",
                    action_id=ACTION_APPROVE,
                    value=value,
                    message_ts="1.0",
                    response_url=slack.response_url(f"r{n}"),
                )
                return link.send("interactive", payload)

            one_at_a_time = []
            for n in range(clicks):
                ack = link.wait_ack(click(n), timeout=10)
                one_at_a_time.append(ack.latency if ack else float("inf"))
            sent = [click(clicks + n) for n in range(burst)]
            at_once = [
                (a.latency if (a := link.wait_ack(e, timeout=10)) else float("inf")) for e in sent
            ]
        finally:
            model.delay = 0
            bot.stop()
    for name, timings in (("one at a time", one_at_a_time), (f"{burst} at once", at_once)):
        timings.sort()
        p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))]
        print(
            f"Socket Mode ack of {len(timings)} clicks {name}, all drafting threads blocked: "
            f"p50 {statistics.median(timings) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
            f"max {timings[-1] * 1000:.1f} ms"
        )


def _installed(clients: list[str]) -> list[str]:
    """The clients whose packages are here: the async ones need aiohttp (and websockets),
    which the bot does not install; `uv pip install aiohttp` to compare them too."""
    missing = {
        name
        for name, module in (("aiohttp", "aiohttp"), ("websockets", "aiohttp"))
        if name in clients and importlib.util.find_spec(module) is None
    }
    for name in sorted(missing):
        print(f"{name}: skipped (aiohttp is not installed)", file=sys.stderr)
    return [name for name in clients if name not in missing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--cap", type=float, default=70.0)
    parser.add_argument("--clicks", type=int, default=200)
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--skip-reconnect", action="store_true")
    parser.add_argument("--skip-acks", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    logging.getLogger("websocket").setLevel(logging.CRITICAL)  # it logs each drop as ERROR
    if not args.skip_reconnect:
        reconnect_table(_installed(args.clients.split(",")), args.faults.split(","), args.cap)
    if not args.skip_acks:
        ack_latency_report(args.clicks, args.burst)


if __name__ == "__main__":
    main()
