"""Galley's own metrics and logs: a real Bot's `/metrics` after an end-to-end
run, and a real `galley run` process whose JSON log has one state-change line per row
of the events table. Counters are process-wide, so the in-process test checks what
changed between two scrapes.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qsl

import httpx
import pytest
from apscheduler.events import EVENT_JOB_MISSED, JobExecutionEvent
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from slack_bolt import BoltRequest
from sqlmodel import Session, col, select

from bot.block_kit import button_value
from bot.run import Bot
from core.api.services import Services
from core.drafting.claims import claim_slot
from core.models import AttemptRow, EffectRow, EventRow, RunRow
from core.setup.settings import Settings
from core.states import EffectState, RunState
from core.store.engine import Store
from core.store.transitions import record_event
from core.testing import FrozenClock, RunningClock
from tests.conftest import config_text, make_config
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import RESPONSE_URL, FakeSlack, rate_limited
from tests.harness import bots
from tests.harness.processes import GALLEY, fake_server, galley_run_env, wait_for
from tests.harness.slack_requests import SlackSender, block_actions, slash_command
from tests.harness.timing import scaled

SECRET = "8f742231b10e8888abcd99yyyzzz85a5-galley-test"
RECIPE = "weekly-update"
SLOT = "2026-11-23T09:00"  # the latest due Monday at bots.BOT_EPOCH: a misfire at start
KEY = f"linkedin|{RECIPE}@{SLOT}|v1"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(bot: Bot) -> Samples:
    text = httpx.get(f"http://127.0.0.1:{bot.http_port}/metrics", timeout=10).text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def bot(tmp_path: Path, db_url: str, fake_anthropic: FakeAnthropic) -> Iterator[Bot]:
    config = tmp_path / "galley.toml"
    config.write_text(config_text() + 'publish = { to = "slack", channel = "C0ANNOUNCE" }\n')
    with FakeSlack() as slack:
        started = bots.start_bot(
            config=config,
            db_url=db_url,
            anthropic_url=fake_anthropic.url,
            slack_url=slack.url,
            secret=SECRET,
        )
        started.fake_slack = slack  # type: ignore[attr-defined]
        try:
            yield started
        finally:
            started.stop()
            started.core.store.dispose()


def test_metrics_count_a_draft_from_model_call_to_approval(bot: Bot) -> None:
    slack: FakeSlack = bot.fake_slack  # type: ignore[attr-defined]
    before = scrape(bot)  # the start-up catch-up already skipped SLOT as a misfire
    calls_before = len(slack.calls())

    slack.script("chat.postMessage", rate_limited(1))  # one 429, then the post goes through
    assert bots.operator(bot).draft(RECIPE, SLOT).outcome == "drafted"
    bot.sync_slack()
    waiting = scrape(bot)
    [message] = slack.messages("C0REVIEW")
    click = block_actions(
        user="U0EDITOR",
        action_id="galley_approve",
        value=button_value(KEY, 1),
        message_ts=message["ts"],
        response_url=slack.response_url("U0EDITOR"),
        message=message,
    )
    sender = SlackSender(f"http://127.0.0.1:{bot.http_port}/slack/events", SECRET)
    try:
        assert sender.interactive(click).status_code == 200
    finally:
        sender.close()
    wait_for(lambda: _run_state(bot) == RunState.SUCCEEDED, 10, "the publication")
    bot.sync_slack()
    after = scrape(bot)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    with bot.core.store.transaction() as session:
        [attempt] = session.exec(select(AttemptRow)).all()
    assert delta("galley_model_calls_total", recipe=RECIPE, model="claude-test", outcome="ok") == 1
    assert delta("galley_model_call_duration_seconds_count", outcome="ok") == 1
    assert delta("galley_model_tokens_total", recipe=RECIPE, kind="input") == attempt.input_tokens
    assert delta("galley_model_tokens_total", recipe=RECIPE, kind="output") == attempt.output_tokens
    assert delta("galley_model_cost_usd_total", recipe=RECIPE) > 0
    assert delta("galley_runs_finished_total", recipe=RECIPE, state="succeeded", reason="") == 1
    assert delta("galley_draft_transitions_total", recipe=RECIPE, state="approved") == 1
    assert delta("galley_draft_transitions_total", recipe=RECIPE, state="published") == 1
    assert delta("galley_publications_total", recipe=RECIPE, outcome="succeeded") == 1
    assert len(slack.messages("C0ANNOUNCE")) == 1
    posts = len(slack.calls("chat.postMessage"))
    assert delta("galley_slack_calls_total", method="chat.postMessage", outcome="ok") == posts - 1
    assert delta("galley_slack_calls_total", method="chat.postMessage", outcome="rate_limited") == 1
    assert delta("galley_slack_calls_total", method="chat.update", outcome="ok") == len(
        slack.calls("chat.update")
    )
    assert delta("galley_slack_ack_duration_seconds_count") == 1
    received: dict[str, int] = {}
    for call in slack.calls()[calls_before:]:
        if call.method.count(".") >= 1:  # Web API methods, not response_url posts
            received[call.method] = received.get(call.method, 0) + 1
    counted = {
        method: sum(
            delta("galley_slack_calls_total", method=method, outcome=outcome)
            for outcome in ("ok", "rate_limited", "refused", "unreachable", "no_answer")
        )
        for method in received
    }
    assert counted == received  # every Web API call, Bolt's listeners' included
    assert value(waiting, "galley_review_queue_depth", recipe=RECIPE) == 1
    assert value(after, "galley_review_queue_depth", recipe=RECIPE) == 0
    assert value(after, "galley_drafts", state="approved") == 0  # published since
    assert value(after, "galley_runs_uncertain") == 0


IMPORT_AND_WATCH = """
import sys
from prometheus_client import REGISTRY

def families():
    return {f.name: f.type for f in REGISTRY.collect() if f.name.startswith("galley_")}

import core.telemetry.metrics
import core.operations.gauges
added = families()
assert added and set(added.values()) <= {"counter", "histogram"}, added
registered = list(REGISTRY._collector_to_names)  # no public list of collectors
assert not any(isinstance(c, core.operations.gauges.DatabaseGauges) for c in registered)

from core.setup.config import parse_config
from core.store.engine import Store
from core.testing import FrozenClock
store = Store(sys.argv[1])
store.upgrade()
config = parse_config(sys.argv[2])
core.operations.gauges.watch_database(store, config, FrozenClock())
core.operations.gauges.watch_database(store, config, FrozenClock())  # a second bot: no second copy
names = [f.name for f in REGISTRY.collect()]
assert names.count("galley_runs_stuck") == 1, names
assert names.count("galley_review_queue_depth") == 1, names
"""


@pytest.mark.slow
def test_importing_core_metrics_registers_no_database_gauges(tmp_path: Path) -> None:
    """The gauges read the database at scrape time: the bot registers them when it
    starts (once per process), and an import of core.telemetry.metrics adds only its counters and
    histograms, so a CLI command or a notebook never queries the database for them."""
    url = f"sqlite:///{tmp_path / 'galley.db'}"
    subprocess.run(
        [sys.executable, "-c", IMPORT_AND_WATCH, url, config_text()],
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )


def test_start_up_misfire_is_counted_by_reason(bot: Bot) -> None:
    samples = scrape(bot)
    reason = {"recipe": RECIPE, "state": "skipped", "reason": "misfire"}
    assert value(samples, "galley_runs_finished_total", **reason) >= 1
    assert _run_state(bot) == RunState.SKIPPED


def _run_state(bot: Bot) -> str | None:
    with bot.core.store.transaction() as session:
        run = session.exec(select(RunRow).where(col(RunRow.id) == f"{RECIPE}@{SLOT}")).one()
        return str(run.state)


# --- the JSON log of a real process --------------------------------------------------------


@pytest.mark.slow
def test_json_log_has_one_state_change_line_per_event_row(tmp_path: Path, db_url: str) -> None:
    config = tmp_path / "galley.toml"
    # Daily at 09:00 with a grace longer than any day (25 h at a DST change): whatever
    # today is, the latest due slot is drafted at start-up.
    text = config_text().replace('"0 9 * * mon"', '"0 9 * * *"')
    config.write_text(text.replace("[defaults]", '[defaults]\nmisfire_grace = "26h"'))
    anthropic_state, slack_state = tmp_path / "anthropic.json", tmp_path / "slack.json"
    store = Store(db_url)
    with (
        fake_server("tests.fakes.anthropic_api", anthropic_state) as anthropic_url,
        fake_server("tests.fakes.slack_api", slack_state) as slack_url,
    ):
        env = galley_run_env(
            config,
            db_url,
            anthropic_url=anthropic_url,
            slack_url=slack_url,
            GALLEY_LOG_FORMAT="json",
        )
        proc = subprocess.Popen(
            [str(GALLEY), "run", "--shutdown-grace", "5"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(lambda: _review_posted(store), 60, "the start-up draft's review post")
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=scaled(30))
    assert proc.returncode == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines()]  # every line is one object
    told = [
        (line["subject"], line["subject_id"], line["from_state"], line["to_state"])
        for line in lines
        if line.get("event") == "state_change"
    ]
    with store.transaction() as session:
        events = session.exec(select(EventRow).order_by(col(EventRow.id))).all()
    store.dispose()
    recorded = [(e.subject, e.subject_id, e.from_state, e.to_state) for e in events]
    assert sorted(told, key=repr) == sorted(recorded, key=repr)
    assert ("run", f"{RECIPE}@", "running", "awaiting_review") in {
        (s, i.split("@")[0] + "@", f, t) for s, i, f, t in told
    }
    assert any(line.get("event") == "model_call" and line["outcome"] == "ok" for line in lines)
    assert any(line.get("event") == "slack_call" for line in lines)
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)


def _review_posted(store: Store) -> bool:
    with store.transaction() as session:
        receipt = session.exec(
            select(EffectRow).where(col(EffectRow.step) == "review")
        ).one_or_none()
    return receipt is not None and receipt.state == EffectState.SUCCEEDED


def test_readyz_is_true_once_running_and_false_when_stopping(bot: Bot) -> None:
    url = f"http://127.0.0.1:{bot.http_port}/readyz"
    answer = httpx.get(url, timeout=10)
    assert (answer.status_code, answer.json()["ready"]) == (200, True)
    assert bot.slack_identity["user_id"] == "UBOT"
    bot._stop.set()  # what SIGTERM sets first
    answer = httpx.get(url, timeout=10)
    assert (answer.status_code, answer.json()["ready"]) == (503, False)


def test_readyz_is_false_before_the_scheduler_runs(bot: Bot) -> None:
    bot.host.scheduler.pause()
    bot.host.scheduler.shutdown(wait=False)
    answer = httpx.get(f"http://127.0.0.1:{bot.http_port}/readyz", timeout=10)
    assert (answer.status_code, answer.json()["ready"]) == (503, False)


def test_socket_mode_acks_are_timed_too(
    tmp_path: Path, sqlite_url: str, fake_anthropic: FakeAnthropic
) -> None:
    """No HTTP route sees a Socket Mode request: Bolt middleware times its ack."""
    config = tmp_path / "galley.toml"
    config.write_text(config_text())
    with FakeSlack() as slack:
        settings = Settings(
            slack_bot_token="xoxb-test",
            slack_app_token="xapp-test",
            anthropic_api_key="test-key",
            anthropic_base_url=fake_anthropic.url,
            galley_config=config,
            galley_database_url=sqlite_url,
            galley_slack_api_url=slack.url + "/api/",
            galley_http_port=0,
        )
        bot = Bot(settings, clock=RunningClock(bots.BOT_EPOCH))
        try:
            acks = "galley_slack_ack_duration_seconds_count"
            before = REGISTRY.get_sample_value(acks) or 0.0
            body = slash_command(text="help", user="U1", response_url=slack.response_url("U1"))
            request = BoltRequest(body=dict(parse_qsl(body)), mode="socket_mode")
            assert bot.bolt.dispatch(request).status == 200
            assert (REGISTRY.get_sample_value(acks) or 0.0) - before == 1
            wait_for(lambda: bool(slack.calls(RESPONSE_URL)), 10, "the reply to /galley help")
        finally:
            bot.core.store.dispose()


# --- the hook's counting, without a bot -------------------------------------------------------


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_claim_taken_over_is_counted_once(store: Store) -> None:
    galley = Services(make_config(claim_lease="10m"), store)
    recipe = galley.recipe(RECIPE)
    slot = galley.resolve_slot(recipe, SLOT)
    clock = FrozenClock()
    before = sample("galley_claim_takeovers_total", recipe=RECIPE)
    claim_slot(store, recipe, slot, worker="dead", actor="dead", manual=True, clock=clock)
    clock.advance(recipe.claim_lease + timedelta(seconds=1))
    taken = claim_slot(store, recipe, slot, worker="b", actor="b", manual=True, clock=clock)
    assert getattr(taken, "took_over", False)
    assert sample("galley_claim_takeovers_total", recipe=RECIPE) - before == 1


def test_a_rolled_back_change_is_not_counted(store: Store) -> None:
    labels = {"subject": "recipe", "to_state": "paused"}
    before = sample("galley_state_changes_total", **labels)

    def record_a_pause(session: Session) -> None:
        record_event(
            session,
            subject="recipe",
            subject_id=RECIPE,
            to_state="paused",
            actor="t",
            at=bots.BOT_EPOCH,
        )

    with pytest.raises(RuntimeError), store.transaction() as session:
        record_a_pause(session)
        raise RuntimeError("roll back")
    assert sample("galley_state_changes_total", **labels) == before
    with store.transaction() as session:
        record_a_pause(session)
    assert sample("galley_state_changes_total", **labels) - before == 1


def test_scheduler_fires_and_misfires_are_counted(bot: Bot) -> None:
    fires = sample("galley_scheduler_fires_total", recipe=RECIPE)
    misfires = sample("galley_scheduler_misfires_total", recipe=RECIPE)
    now = bot.core.clock.now()
    bot.host._on_fire(RECIPE, scheduled_at=now)
    missed = JobExecutionEvent(EVENT_JOB_MISSED, f"recipe:{RECIPE}", "default", now)
    bot.host._on_missed(missed)
    bot.host.wait_idle(10)
    assert sample("galley_scheduler_fires_total", recipe=RECIPE) - fires == 1
    assert sample("galley_scheduler_misfires_total", recipe=RECIPE) - misfires == 1
