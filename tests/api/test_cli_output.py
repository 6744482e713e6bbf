"""What the terminal shows: plain text, each reason once, exit codes that
name the operator's mistake, and pages that end where the runs end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic, status

SLOTS = ("2026-11-02T09:00", "2026-11-09T09:00", "2026-11-16T09:00")


@pytest.fixture
def env(tmp_path: Path, sqlite_url: str, fake_anthropic: FakeAnthropic) -> dict[str, str]:
    config = tmp_path / "galley.toml"
    config.write_text(config_text(pending_limit=10))
    return {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": sqlite_url,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
    }


def galley(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_a_refused_anthropic_key_exits_2_naming_the_variable(
    env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(status(401), status(401))
    code, out, err = galley(env, "draft", "weekly-update", "--slot", SLOTS[0])
    assert code == 2
    assert err.splitlines() == [
        "ANTHROPIC_API_KEY: the Anthropic API refused Galley's key (HTTP 401)"
    ]
    code, out, _ = galley(env, "draft", "weekly-update", "--slot", SLOTS[1], "--json")
    assert (code, json.loads(out)["reason"]) == (2, "auth")


def test_a_failed_drafts_reason_is_said_once(
    env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(status(400))
    code, out, _ = galley(env, "draft", "weekly-update", "--slot", SLOTS[0])
    assert code == 1
    assert out.startswith(
        "failed (invalid_request: the Anthropic API rejected the request (HTTP 400): fake 400)"
    )
    assert out.count("HTTP 400") == 1


def test_retrying_a_failed_draft_prints_plain_text_and_its_help_says_it_redrafts(
    env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.script(status(400))
    galley(env, "draft", "weekly-update", "--slot", SLOTS[0])
    code, out, _ = galley(env, "retry", f"weekly-update@{SLOTS[0]}")
    assert code == 0
    assert out.startswith(f"drafted  run=weekly-update@{SLOTS[0]}")
    for markup in ("`", "*"):
        assert markup not in out
    _, usage, _ = galley(env, "retry", "--help")
    assert "Draft a failed run's slot again" in " ".join(usage.split())


@pytest.mark.parametrize(("runs", "offered"), [(3, False), (4, True)])
def test_a_page_offers_older_runs_only_when_there_are_some(
    env: dict[str, str], runs: int, offered: bool
) -> None:
    slots = [*SLOTS, "2026-11-23T09:00"][:runs]
    for slot in slots:
        assert galley(env, "draft", "weekly-update", "--slot", slot)[0] == 0
    code, out, _ = galley(env, "runs", "--limit", "3")
    assert code == 0
    older = [line for line in out.splitlines() if line.startswith("older:")]
    assert older == ([f"older: galley runs --before weekly-update@{slots[-3]}"] if offered else [])
    if offered:
        code, out, _ = galley(env, "runs", "--limit", "3", "--before", f"weekly-update@{slots[-3]}")
        assert f"weekly-update@{slots[0]}" in out and "older:" not in out
    code, out, _ = galley(env, "runs", "--limit", "3", "--json")
    assert len(json.loads(out)["runs"]) == 3


def test_status_counts_a_draft_waiting_in_a_batch(env: dict[str, str]) -> None:
    code, out, _ = galley(env, "draft", "weekly-update", "--slot", SLOTS[0], "--batch", "--json")
    assert (code, json.loads(out)["outcome"]) == (0, "batched")
    code, out, _ = galley(env, "status")
    assert code == 0
    [row] = [line for line in out.splitlines() if "weekly-update" in line]
    header = next(line for line in out.splitlines() if "in a batch" in line)
    assert header.index("in a batch") <= row.index(" 1 ") + 1 <= header.index("next slot")
