"""The review loop over Socket Mode, end to end: a real `Bot` (Bolt on Galley's Socket
Mode client) connected to the Socket Mode fake, against the fake Web API and the fake
Anthropic API. The fake speaks Slack's protocol (hello, envelopes, acks, disconnect) and
breaks the link the ways networks do; tests check rows, acks and Web API calls.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from sqlmodel import col, select, update

from core.errors import ConfigError
from core.models import DeliveryRow, RunRow
from core.states import DraftState, RunState
from core.store.deliveries import DeliveryBook, first_delivery, forget_old_deliveries
from core.store.engine import Store
from core.testing import FrozenClock
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.fakes.slack_api import RESPONSE_URL, FakeSlack
from tests.fakes.socket_mode import APP_TOKEN, FakeSocketMode
from tests.harness import bots
from tests.harness.bots import operator
from tests.harness.slack_harness import (
    APPROVE,
    CHANNEL,
    EDIT,
    KEY,
    PEOPLE,
    RECIPE,
    REJECT,
    RUN,
    SECRET,
    SETTLE,
    Harness,
    actions_of,
    button,
    eventually,
)
from tests.harness.slack_requests import block_actions, text_input, view_submission
from tests.harness.slow_marks import starts_a_server

ACK_DEADLINE = 3.0  # Slack's: an envelope not acked within 3 s is shown as failed


@dataclass
class Reply:
    """What the Socket Mode fake got back for one envelope (an HTTP-like view of it)."""

    envelope_id: str
    acked: bool
    payload: dict[str, Any] | None

    @property
    def status_code(self) -> int:
        return 200 if self.acked else 504

    def json(self) -> dict[str, Any]:
        return self.payload or {}


class SocketSender:
    """Sends Slack's requests as Socket Mode envelopes, with the HTTP helpers' interface:
    `send(form body)` for slash commands, `interactive(payload)` for clicks and modals."""

    def __init__(self, fake: FakeSocketMode) -> None:
        self.fake = fake

    def send(self, body: str, **_: Any) -> Reply:
        fields = dict(parse_qsl(body, keep_blank_values=True))
        if "payload" in fields:
            return self.interactive(json.loads(fields["payload"]))
        return self.envelope("slash_commands", fields)

    def interactive(self, payload: dict[str, Any], **_: Any) -> Reply:
        return self.envelope("interactive", payload)

    def event(self, payload: dict[str, Any]) -> Reply:
        return self.envelope("events_api", payload)

    def envelope(self, kind: str, payload: dict[str, Any], **options: Any) -> Reply:
        envelope_id = self.fake.send(kind, payload, **options)
        ack = self.fake.wait_ack(envelope_id, timeout=ACK_DEADLINE)
        return Reply(envelope_id, ack is not None, ack.payload if ack else None)

    def close(self) -> None:
        pass


@dataclass
class SocketHarness(Harness):
    socket: FakeSocketMode | None = None

    @property
    def link(self) -> FakeSocketMode:
        assert self.socket is not None
        return self.socket

    def click_payload(self, action_id: str, user: str, key: str = KEY) -> dict[str, Any]:
        message = self.message_for(key)
        return block_actions(
            user=user,
            action_id=action_id,
            value=button(message["blocks"], action_id),
            message_ts=message["ts"],
            response_url=self.slack.response_url(user),
            message=message,
        )

    def readyz(self) -> int:
        return httpx.get(f"http://127.0.0.1:{self.bot.http_port}/readyz").status_code


StartSocketBot = Callable[..., SocketHarness]


@pytest.fixture
@starts_a_server
def start_socket_bot(tmp_path: Path, fake_anthropic: FakeAnthropic) -> Iterator[StartSocketBot]:
    """A Bot in Socket Mode on `db_url`; `replica_of=` starts a second replica on the same
    fakes (Slack then spreads envelopes across both connections)."""
    started: list[SocketHarness] = []
    fakes: list[FakeSlack | FakeSocketMode] = []

    def start(
        db_url: str, *, slack: str = "", replica_of: SocketHarness | None = None, **overrides: Any
    ) -> SocketHarness:
        text = config_text(**overrides).replace(
            f'review_channel = "{CHANNEL}"', f'review_channel = "{CHANNEL}"\n{slack}'
        )
        path = tmp_path / f"galley-{len(started)}.toml"
        path.write_text(text)
        if replica_of is None:
            web = FakeSlack().start()
            link = FakeSocketMode(web).start()
            fakes.extend([link, web])
        else:
            web, link = replica_of.slack, replica_of.link
        open_before = len(link.open_connections())
        bot = bots.start_bot(
            config=path,
            db_url=db_url,
            anthropic_url=fake_anthropic.url,
            slack_url=web.url,
            secret=SECRET,
            app_token=APP_TOKEN,
        )
        eventually(lambda: len(link.open_connections()) > open_before, "the socket", 10)
        eventually(lambda: bot.ready()[0], "readiness", 10)
        harness = SocketHarness(
            bot, web, fake_anthropic, Store(db_url), SocketSender(link), socket=link
        )  # type: ignore[arg-type]
        started.append(harness)
        return harness

    yield start
    for harness in started:
        harness.bot.stop()
        harness.bot.core.store.dispose()
        harness.store.dispose()
    for fake in fakes:
        fake.stop()


# --- /galley and the review buttons, over the socket -------------------------------------


def test_every_slash_command_is_acked_and_answered_over_socket_mode(
    start_socket_bot: StartSocketBot, sqlite_url: str
) -> None:
    h = start_socket_bot(sqlite_url, slack=PEOPLE)

    assert "/galley run" in h.ask("help", "U0STRANGER")
    assert "0/3 waiting" in h.ask("status", "U0STRANGER")
    assert h.ask("pause all", "U0EDITOR") == "Only Galley's admins may `pause`."
    assert RECIPE in h.ask("pause all holiday", "U0ADMIN")
    assert h.recipe_row().paused is True
    assert RECIPE in h.ask("resume all", "U0ADMIN")
    assert h.recipe_row().paused is False
    assert "v2" in h.ask(f"bump {RECIPE} new tone", "U0ADMIN")
    assert h.recipe_row().version == 2

    h.anthropic.script(ok(delay=1))
    assert RECIPE in h.ask(f"run {RECIPE}", "U0ADMIN")
    eventually(lambda: len(h.replies("U0ADMIN")) >= 5, "the outcome of the run", 10)
    run = h.run_row(RUN)
    assert run is not None and run.state == RunState.AWAITING_REVIEW
    assert len(h.anthropic.requests) == 1
    acks = h.link.acks
    assert len(acks) == 7 and all(a.latency < ACK_DEADLINE for a in acks)


def test_reject_and_edit_modals_work_over_socket_mode(
    start_socket_bot: StartSocketBot, sqlite_url: str
) -> None:
    h = start_socket_bot(sqlite_url, slack=PEOPLE, pending_limit=5)
    key, _ = h.draft_and_post()

    assert h.click(EDIT, "U0EDITOR", key).acked
    [opened] = eventually(lambda: h.calls("views.open"), "the edit modal")
    metadata = opened.params["view"]["private_metadata"]
    empty = view_submission(
        user="U0EDITOR",
        callback_id="galley_edit_modal",
        private_metadata=metadata,
        values={"part_0": {"text": text_input(" ")}},
    )
    refused = h.sender.interactive(empty)
    assert refused.acked and refused.json()["response_action"] == "errors"  # in the ack
    edited = view_submission(
        user="U0EDITOR",
        callback_id="galley_edit_modal",
        private_metadata=metadata,
        values={"part_0": {"text": text_input("Shorter and better.")}},
    )
    assert h.sender.interactive(edited).acked
    eventually(lambda: h.draft_row(key).revision == 2, "revision 2")
    eventually(lambda: h.calls("chat.update"), "the message showing revision 2")

    assert h.click(REJECT, "U0EDITOR", key).acked
    opened_views = eventually(lambda: h.calls("views.open")[1:], "the reject modal")
    view = opened_views[0].params["view"]
    rejection = view_submission(
        user="U0EDITOR",
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={"reason": {"reason": text_input("Off-brand")}},
    )
    assert h.sender.interactive(rejection).acked

    eventually(lambda: h.draft_row(key).state == DraftState.REJECTED, "the rejection")
    draft = h.draft_row(key)
    assert (draft.text, draft.decision_reason) == ("Shorter and better.", "Off-brand")
    run = h.run_row()
    assert run is not None and run.state == RunState.REJECTED


def test_stale_and_concurrent_clicks_over_socket_mode_decide_once_and_say_why(
    start_socket_bot: StartSocketBot, sqlite_url: str
) -> None:
    h = start_socket_bot(sqlite_url, slack=PEOPLE)
    key, message = h.draft_and_post()
    stale_value = button(message["blocks"], APPROVE)
    barrier = threading.Barrier(2)

    def click(user: str) -> None:
        barrier.wait()
        assert h.click(APPROVE, user, key).acked

    threads = [threading.Thread(target=click, args=(u,)) for u in ("U0EDITOR", "U0EDITOR2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    [loser_reply] = eventually(lambda: h.replies(), "the loser's reply")
    operator(h.bot).bump(RECIPE, actor="U0ADMIN")
    assert h.click(APPROVE, "U0EDITOR", key, value=stale_value).acked  # decided already

    draft = h.draft_row(key)
    assert draft.state == DraftState.APPROVED
    assert len(h.draft_events(DraftState.APPROVED, key)) == 1
    assert loser_reply.startswith("Already approved by")
    eventually(lambda: len(h.replies()) == 2, "the stale click's reply")


def test_alert_buttons_over_socket_mode_check_the_admin_and_settle_the_run(
    start_socket_bot: StartSocketBot, sqlite_url: str
) -> None:
    h = start_socket_bot(sqlite_url, slack=PEOPLE + '\nalert_channel = "C0ALERTS"', pending_limit=5)
    h.draft_and_post()
    with h.store.transaction() as session:  # a run whose publication is in doubt
        session.execute(
            update(RunRow).where(col(RunRow.id) == RUN).values(state=RunState.UNCERTAIN)
        )
    h.bot.reconcile()
    [alert] = eventually(lambda: h.slack.messages("C0ALERTS"), "the alert")
    [actions] = actions_of(alert["blocks"])
    [value] = [e["value"] for e in actions["elements"] if e["action_id"] == "galley_cancel"]

    def click_cancel(user: str) -> Reply:
        payload = block_actions(
            user=user,
            action_id="galley_cancel",
            value=value,
            message_ts=alert["ts"],
            response_url=h.slack.response_url(user),
            channel="C0ALERTS",
            block_id="galley_alert",
            message=alert,
        )
        return h.sender.interactive(payload)

    assert click_cancel("U0EDITOR").acked
    [refusal] = eventually(lambda: h.replies("U0EDITOR"), "the refusal")
    assert "admins" in refusal
    assert click_cancel("U0ADMIN").acked
    eventually(lambda: (r := h.run_row()) is not None and r.state == RunState.CANCELLED, "cancel")
    [update_call] = eventually(lambda: h.calls("chat.update"), "the settled alert")
    assert update_call.params["channel"] == "C0ALERTS"
    assert actions_of(update_call.params["blocks"]) == []


def test_every_envelope_is_acked_in_time_while_every_drafting_thread_waits_on_the_model(
    start_socket_bot: StartSocketBot, sqlite_url: str
) -> None:
    h = start_socket_bot(sqlite_url, slack=PEOPLE, pending_limit=50)
    key, _ = h.draft_and_post()
    h.anthropic.delay = 3.0  # every model call from here on hangs, longer than the clicks take
    for wall in ("2026-10-05T09:00", "2026-10-12T09:00", "2026-10-19T09:00", "2026-10-26T09:00"):
        recipe = h.bot.core.recipe(RECIPE)
        slot = h.bot.core.resolve_slot(recipe, wall)
        h.bot.host.submit(h.bot.core.drafting.draft_slot, recipe, slot, manual=True)
    eventually(lambda: len(h.anthropic.requests) >= 3, "the drafting threads to block", 10)

    replies = [h.command("status", f"U{n:03d}") for n in range(20)]
    replies += [h.click(APPROVE, "U0STRANGER", key) for _ in range(10)]

    assert all(r.acked for r in replies)
    latencies = sorted(a.latency for a in h.link.acks)
    assert latencies[-1] < ACK_DEADLINE, latencies
    assert statistics.median(latencies) < 0.5, latencies


# --- faults ----------------------------------------------------------------------------------


FAULTS = ("reset", "close", "refresh", "warning", "eof", "blackhole", "restart")


def test_galley_reconnects_by_itself_within_10s_after_each_fault_and_readiness_follows(
    start_socket_bot: StartSocketBot, sqlite_url: str
) -> None:
    """One bot through every fault in turn: RST, a close frame, a refresh, a disconnect
    warning, a TCP EOF without a close frame, a silently half-open link, and the server
    going away for 2 s."""
    h = start_socket_bot(sqlite_url, slack=PEOPLE)
    reconnected: dict[str, float] = {}
    statuses: list[int] = []  # /readyz while the server was away
    for fault in FAULTS:
        before = h.link.last_connection()
        watching = threading.Event()

        def watch_readiness(done: threading.Event = watching) -> None:
            while not done.is_set():
                statuses.append(h.readyz())
                time.sleep(0.05)

        watcher = threading.Thread(target=watch_readiness)
        if fault == "restart":
            watcher.start()
            h.link.restart(down_for=2.0)
        elif fault == "warning":
            h.link.refresh("warning")  # Slack will close soon: the client moves now
        else:
            getattr(h.link, fault)()
        try:
            reconnected[fault] = h.link.wait_connected(1, timeout=10, after=before)
            eventually(lambda: h.readyz() == 200, f"readiness after {fault}", 10)
        finally:
            watching.set()
            if watcher.is_alive():
                watcher.join()
        # the new link carries commands and their answers
        assert "/galley run" in h.ask("help", f"U0{fault.upper()}")

    assert all(seconds < 10 for seconds in reconnected.values()), reconnected
    assert 503 in statuses  # not ready while the server was away (ready again: above)


def test_readiness_waits_for_hello(start_socket_bot: StartSocketBot, sqlite_url: str) -> None:
    h = start_socket_bot(sqlite_url)
    h.link.hello_delay = 1.5
    before = h.link.last_connection()

    h.link.reset()
    time.sleep(1.0)  # connected again, but Slack has not said hello

    assert h.readyz() == 503
    h.link.wait_connected(1, timeout=10, after=before)
    eventually(lambda: h.readyz() == 200, "readiness after hello")


# --- redelivery and replicas -----------------------------------------------------------------


def test_a_redelivered_click_changes_state_once_and_is_not_shown_as_a_second_click(
    start_socket_bot: StartSocketBot, db_url: str
) -> None:
    h = start_socket_bot(db_url, slack=PEOPLE)
    key, _ = h.draft_and_post()
    payload = h.click_payload(APPROVE, "U0EDITOR", key)

    first = h.sender.interactive(payload)
    [update_call] = eventually(lambda: h.calls("chat.update"), "the decided message")
    assert actions_of(update_call.params["blocks"]) == []  # "approved by", not buttons
    assert h.draft_row(key).decided_by == "U0EDITOR"
    again = h.sender.envelope(
        "interactive", payload, envelope_id=first.envelope_id, retry_attempt=1
    )
    time.sleep(SETTLE)

    assert first.acked and again.acked  # Slack stops re-sending only once acked
    assert len(h.draft_events(DraftState.APPROVED, key)) == 1
    assert h.replies("U0EDITOR") == []  # not "Already approved by you"
    assert len(h.calls("chat.update")) == 1


def test_a_click_sent_just_before_a_drop_is_applied_once_after_redelivery(
    start_socket_bot: StartSocketBot, sqlite_url: str
) -> None:
    h = start_socket_bot(sqlite_url, slack=PEOPLE)
    key, _ = h.draft_and_post()
    payload = h.click_payload(APPROVE, "U0EDITOR", key)
    before = h.link.last_connection()

    envelope_id = h.link.send("interactive", payload)
    h.link.reset()  # the ack, if any, is lost with the link
    h.link.wait_connected(1, timeout=10, after=before)
    redelivered = h.sender.envelope(
        "interactive", payload, envelope_id=envelope_id, retry_attempt=1
    )
    eventually(lambda: h.calls("chat.update"), "the decided message")
    time.sleep(SETTLE)

    assert redelivered.acked
    assert len(h.draft_events(DraftState.APPROVED, key)) == 1
    assert h.replies("U0EDITOR") == []
    assert len(h.calls("chat.update")) == 1


def test_two_replicas_decide_each_click_once_wherever_slack_sends_it(
    start_socket_bot: StartSocketBot, db_url: str
) -> None:
    first = start_socket_bot(db_url, slack=PEOPLE)
    second = start_socket_bot(db_url, slack=PEOPLE, replica_of=first)
    one, two = first.link.open_connections()
    key, _ = first.draft_and_post()
    payload = first.click_payload(APPROVE, "U0EDITOR", key)

    # A click to one replica, redelivered to the other: one decision, no second answer.
    sent = first.link.send("interactive", payload, connection=one)
    first.link.send("interactive", payload, envelope_id=sent, retry_attempt=1, connection=two)
    # Two people at once, one on each replica: one decision, the other is told who won.
    second_key = first.draft("2026-11-16T09:00")
    first.bot.sync_slack()
    clicks = [first.click_payload(APPROVE, u, second_key) for u in ("U0EDITOR", "U0EDITOR2")]
    for payload_n, connection in zip(clicks, (one, two), strict=True):
        first.link.send("interactive", payload_n, connection=connection)
    eventually(lambda: len(first.link.acks) == 4, "every ack")
    [loser] = eventually(lambda: first.replies(), "the loser's reply")
    eventually(lambda: len(second.calls("chat.update")) >= 2, "both decided messages")
    time.sleep(SETTLE)

    assert {a.connection for a in first.link.acks} == {one, two}
    assert len(first.draft_events(DraftState.APPROVED, key)) == 1
    assert len(first.draft_events(DraftState.APPROVED, second_key)) == 1
    winner = first.draft_row(second_key).decided_by
    assert loser == f"Already approved by <@{winner}>."
    assert len(first.slack.calls(RESPONSE_URL)) == 1
    assert len(second.calls("chat.update")) == 2


def test_one_delivery_of_an_envelope_wins_among_concurrent_ones_and_old_ones_are_pruned(
    store: Store,
) -> None:
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    barrier = threading.Barrier(6)
    wins: list[bool] = []

    def deliver() -> None:
        barrier.wait()
        wins.append(first_delivery(store, "Env-1", now))

    threads = [threading.Thread(target=deliver) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    first_delivery(store, "Env-2", now + timedelta(minutes=50))

    assert sorted(wins) == [False] * 5 + [True]
    assert forget_old_deliveries(store, now + timedelta(minutes=70)) == 1  # Env-1 only
    assert first_delivery(store, "Env-1", now + timedelta(minutes=70)) is True
    assert first_delivery(store, "Env-2", now + timedelta(minutes=70)) is False


def test_a_burst_of_deliveries_is_recorded_in_two_writes_and_each_envelope_wins_once(
    store: Store,
) -> None:
    """Twenty listener threads at once, ten envelopes each delivered twice: the first
    write is held until the other nineteen wait, and they all go in the second one."""
    book = DeliveryBook(store, FrozenClock(datetime(2026, 11, 25, 12, 0, tzinfo=UTC)))
    real = store.transaction
    writes: list[int] = []

    @contextmanager
    def counted() -> Iterator[Any]:
        writes.append(1)
        if len(writes) == 1:  # the leader's write: let the burst queue up behind it
            deadline = time.monotonic() + 10
            while len(book._waiting) < 19 and time.monotonic() < deadline:
                time.sleep(0.005)
        with real() as session:
            yield session

    store.transaction = counted  # type: ignore[method-assign]
    barrier = threading.Barrier(20)
    wins: dict[str, list[bool]] = {f"Env-{n % 10}": [] for n in range(20)}

    def deliver(envelope: str) -> None:
        barrier.wait()
        wins[envelope].append(book.first(envelope))

    threads = [threading.Thread(target=deliver, args=(f"Env-{n % 10}",)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert all(sorted(won) == [False, True] for won in wins.values()), wins
    assert len(writes) == 2
    with store.read() as session:
        assert len(session.exec(select(DeliveryRow)).all()) == 10


def test_an_app_token_slack_refuses_stops_the_start_with_one_line_naming_it(
    tmp_path: Path, fake_anthropic: FakeAnthropic, sqlite_url: str
) -> None:
    config = tmp_path / "galley.toml"
    config.write_text(config_text())
    with FakeSlack() as web, FakeSocketMode(web) as link:
        with pytest.raises(ConfigError) as refused:
            bots.start_bot(
                config=config,
                db_url=sqlite_url,
                anthropic_url=fake_anthropic.url,
                slack_url=web.url,
                secret=SECRET,
                app_token="xapp-1-not-this-app",
            )
        assert link.connections == []
        assert len(web.calls("apps.connections.open")) == 1
    assert str(refused.value) == (
        "SLACK_APP_TOKEN was refused by Slack (apps.connections.open: invalid_auth)"
    )
