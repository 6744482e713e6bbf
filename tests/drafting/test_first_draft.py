"""A fresh `galley run` drafts at once: the model client is loaded before the
scheduler can fire, and a call's latency counts from the moment its request is sent.

The process test asserts order (drafter ready, then the first fire, then the request at
the fake), never wall time; `bench/first_draft.py` prints the figures.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from core.api.galley import Galley
from core.api.services import Services
from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting.post_shape import build_request
from core.models import AttemptRow, DraftRow
from core.ports import DraftRequest, ModelReply
from core.states import DraftState
from core.store.engine import Store
from tests.conftest import config_text, make_config
from tests.fakes.anthropic_api import FakeAnthropic, read_requests, write_script
from tests.harness.processes import GALLEY, fake_server, galley_run_env, stop, wait_for
from tests.harness.timing import scaled

FAKE_LATENCY_S = 0.5
SLOT = "2026-11-23T09:00"


class TimedDrafter:
    """Answers at once, saying the call took `latency_s` after `before_send_s` of set-up."""

    def draft(self, request: DraftRequest) -> ModelReply:
        return ModelReply(
            "A draft.", request.model, "req", "end_turn", 10, 20, 0, 0, 0.25, before_send_s=3.0
        )


def test_an_attempt_records_the_latency_from_sending_not_the_set_up_before_it(
    store: Store,
) -> None:
    galley = Galley(make_config(), store, drafter=TimedDrafter())
    galley.draft("weekly-update", SLOT)
    with store.read() as session:
        [attempt] = session.exec(select(AttemptRow)).all()
    assert attempt.latency_ms == 250


def test_the_anthropic_drafter_times_the_call_from_the_request_leaving(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.delay = FAKE_LATENCY_S
    drafter = AnthropicDrafter("test-key", fake_anthropic.url)
    assert drafter.prepare() >= 0
    galley = Services(make_config(), store, drafter=drafter)
    recipe = galley.recipe("weekly-update")
    reply = drafter.draft(build_request(recipe, galley.resolve_slot(recipe, SLOT), 1))
    assert reply.latency_s is not None and reply.latency_s >= FAKE_LATENCY_S
    assert 0 <= reply.before_send_s < reply.latency_s


@pytest.fixture
def minutely(tmp_path: Path, sqlite_url: str) -> Iterator[dict[str, Any]]:
    config = tmp_path / "galley.toml"
    text = config_text(pending_limit=100).replace('"0 9 * * mon"', '"* * * * *"')
    config.write_text(text.replace("[defaults]", '[defaults]\nmisfire_grace = "5m"'))
    anthropic_state, slack_state = tmp_path / "anthropic.json", tmp_path / "slack.json"
    with (
        fake_server("tests.fakes.anthropic_api", anthropic_state) as anthropic_url,
        fake_server("tests.fakes.slack_api", slack_state) as slack_url,
    ):
        write_script(anthropic_state, [], delay=FAKE_LATENCY_S)
        env = galley_run_env(
            config,
            sqlite_url,
            anthropic_url=anthropic_url,
            slack_url=slack_url,
            GALLEY_LOG_FORMAT="json",
        )
        yield {"env": env, "anthropic": anthropic_state, "url": sqlite_url}


@pytest.mark.slow
def test_a_fresh_galley_run_loads_the_drafter_before_the_first_fire(
    minutely: dict[str, Any],
) -> None:
    store = Store(minutely["url"])
    proc = subprocess.Popen(
        [str(GALLEY), "run", "--shutdown-grace", "5"],
        env=minutely["env"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def drafted() -> bool:
            with store.read() as session:
                return any(d.state == DraftState.READY for d in session.exec(select(DraftRow)))

        wait_for(drafted, 120, "the catch-up's draft")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=scaled(60))
    finally:
        if proc.poll() is None:
            stop(proc)
        store.dispose()
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    events = [line.get("event") for line in lines]
    ready = events.index("drafter_ready")
    first_fire = next(i for i, line in enumerate(lines) if line.get("to_state") == "pending")
    first_call = events.index("model_call")
    assert ready < first_fire < first_call, [line["message"] for line in lines]
    # the request left after the drafter was ready, and the call paid no set-up of its own
    request = read_requests(minutely["anthropic"])[0]  # a minute may pass: the next slot's
    ready_at = datetime.fromisoformat(lines[ready]["time"]).timestamp()
    assert request["at"] >= ready_at
    call = lines[first_call]
    assert call["outcome"] == "ok" and call["latency_s"] >= FAKE_LATENCY_S
    assert call["before_send_s"] < call["latency_s"]
