"""Socket Mode for `galley run`: Bolt's handler on the Socket Mode client Galley picked
(see `socket_mode_client`), with each envelope acted on once across replicas.

Slack re-sends an envelope whose ack it missed (same envelope_id, retry_attempt > 0),
maybe to another replica's connection. The first delivery claims the envelope id in the
database; a redelivery is acked and dropped, so it neither decides twice nor tells the
clicker "already approved" about their own click. This module never decides anything
itself: it forwards to Bolt, which runs the same listeners as HTTP mode.
"""

from __future__ import annotations

import logging
import socket
import time
from contextlib import suppress
from typing import Any

from slack_bolt import App
from slack_bolt.adapter.socket_mode.base_handler import BaseSocketModeHandler
from slack_bolt.adapter.socket_mode.internals import run_bolt_app, send_response
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.socket_mode.websocket_client import SocketModeClient
from websocket import WebSocketTimeoutException

from core.errors import ConfigError
from core.ports import Clock
from core.store.deliveries import DeliveryBook
from core.store.engine import Store

log = logging.getLogger(__name__)
PING_INTERVAL = 4.0  # seconds between pings
# A ping unanswered this long ends the link, so a half-open link is dropped. At most half
# the interval: websocket-client checks the deadline only between pings, every timeout s.
PING_TIMEOUT = 2.0


class PingCheckedClient(SocketModeClient):
    """slack_sdk's websocket-client based client, with the pong deadline it leaves out.

    Against the Socket Mode fake (bench/socket_mode.py measures it): it reconnects soon
    after a reset, a close frame, a refresh or a TCP EOF at idle CPU, where the builtin
    client spins a core for a long while after an EOF; but without a pong deadline a
    half-open link is never noticed. With one, it is dropped within PING_INTERVAL +
    2 x PING_TIMEOUT and replaced.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_error_listeners.append(_cut_dead_link)

    def _run_current_session(self) -> None:
        if self.current_session is None:
            return
        try:
            self.current_session.run_forever(ping_interval=PING_INTERVAL, ping_timeout=PING_TIMEOUT)
        except Exception as exc:  # the monitor reconnects once the session is closed
            self.logger.warning("Socket Mode session ended: %s", exc)
            if self.current_session is not None:
                self.current_session.close()


def _cut_dead_link(ws: Any, error: Exception) -> None:
    """A link whose pong never came is dead: shut the socket so the close handshake that
    follows fails at once instead of waiting 3 s for an answer that cannot come."""
    if isinstance(error, WebSocketTimeoutException) and ws.sock is not None and ws.sock.sock:
        with suppress(OSError):
            ws.sock.sock.shutdown(socket.SHUT_RDWR)


def socket_mode_client(
    app_token: str, web_client: WebClient, logger: Any = None
) -> PingCheckedClient:
    """The Socket Mode client Galley runs on (bench/socket_mode.py measures the choice)."""
    return PingCheckedClient(
        app_token=app_token,
        logger=logger,
        web_client=web_client,
        ping_interval=PING_INTERVAL,
        concurrency=10,
    )


class SocketLink(BaseSocketModeHandler):
    """Bolt's Socket Mode handler with delivery dedup and a connection state for /readyz."""

    client: PingCheckedClient

    def __init__(self, app: App, app_token: str, *, store: Store, clock: Clock) -> None:
        self.app = app
        self.store, self.clock = store, clock
        self.deliveries = DeliveryBook(store, clock)
        self.client = socket_mode_client(app_token, app.client, app.logger)
        self.client.socket_mode_request_listeners.append(self.handle)
        self.client.message_listeners.append(self._note_hello)
        self._greeted: object = None  # the session whose `hello` came: envelopes can flow

    def _note_hello(self, client: Any, message: dict[str, Any], raw: str | None) -> None:
        if message.get("type") == "hello":
            self._greeted = client.current_session

    def handle(self, client: Any, req: SocketModeRequest) -> None:
        if not self.deliveries.first(req.envelope_id):
            log.info(
                "envelope %s delivered again (retry %s): acked, not acted on",
                req.envelope_id,
                req.retry_attempt,
            )
            client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        started = time.time()  # send_response logs the time spent against time.time()
        send_response(client, req, run_bolt_app(self.app, req), started)

    def connect(self) -> None:
        """Open the first connection; an app token Slack refuses is an operator error."""
        try:
            self.client.connect()
        except SlackApiError as exc:
            self.close()
            error = exc.response.get("error")
            raise ConfigError(
                [f"SLACK_APP_TOKEN was refused by Slack (apps.connections.open: {error})"]
            ) from None
        except OSError as exc:
            self.close()
            raise ConfigError([f"Slack is unreachable for Socket Mode: {exc}"]) from None

    def close(self) -> None:
        self.client.close()

    def is_connected(self) -> bool:
        """Connected and greeted: Slack sends envelopes only after `hello`."""
        session = self.client.current_session
        return bool(self.client.is_connected()) and session is not None and session is self._greeted
