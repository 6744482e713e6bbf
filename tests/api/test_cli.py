"""The `galley` command line: exit codes, JSON shapes and clear errors (docs/design.md §16)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness.processes import galley_env


@pytest.fixture
def env(tmp_path: Path, db_url: str, fake_anthropic: FakeAnthropic) -> dict[str, str]:
    config = tmp_path / "galley.toml"
    config.write_text(config_text(pending_limit=1))
    return {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": db_url,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
    }


def galley(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout


def test_galley_draft_prints_drafted_then_exists_then_skipped_for_backpressure(
    env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    code, out = galley(env, "draft", "weekly-update", "--slot", "2026-11-23T09:00", "--json")
    assert code == 0
    assert json.loads(out) == {
        "outcome": "drafted",
        "reason": None,
        "run": "weekly-update@2026-11-23T09:00",
        "key": "linkedin|weekly-update@2026-11-23T09:00|v1",
        "detail": None,
    }
    code, out = galley(env, "draft", "weekly-update", "--slot", "2026-11-23T09:00", "--json")
    assert (code, json.loads(out)["outcome"]) == (0, "exists")
    code, out = galley(env, "draft", "weekly-update", "--slot", "2026-11-30T09:00", "--json")
    assert (code, json.loads(out)["outcome"], json.loads(out)["reason"]) == (
        0,
        "skipped",
        "backpressure",
    )
    assert len(fake_anthropic.requests) == 1


def test_a_failed_draft_exits_1(env: dict[str, str], fake_anthropic: FakeAnthropic) -> None:
    from tests.fakes.anthropic_api import status

    fake_anthropic.script(status(400))
    code, out = galley(env, "draft", "weekly-update", "--slot", "2026-11-23T09:00", "--json")
    assert (code, json.loads(out)["outcome"], json.loads(out)["reason"]) == (
        1,
        "failed",
        "invalid_request",
    )


def test_status_and_runs_show_what_bump_pause_and_resume_changed(env: dict[str, str]) -> None:
    galley(env, "draft", "weekly-update", "--slot", "2026-11-23T09:00")
    assert galley(env, "bump", "weekly-update")[0] == 0
    assert galley(env, "pause", "all", "--reason", "holiday")[0] == 0

    code, out = galley(env, "status", "--json")
    [recipe] = json.loads(out)["recipes"]
    assert code == 0
    assert {k: recipe[k] for k in ("name", "version", "paused", "pending", "pending_limit")} == {
        "name": "weekly-update",
        "version": 2,
        "paused": True,
        "pending": 0,  # the v1 draft was superseded by the bump
        "pending_limit": 1,
    }
    assert recipe["next_slot"] is not None
    assert json.loads(out)["uncertain"] == []

    assert galley(env, "resume", "weekly-update")[0] == 0
    code, out = galley(env, "runs", "--json")
    [run] = json.loads(out)["runs"]
    assert set(run) >= {"id", "recipe", "slot", "state", "reason", "draft_key", "attempts"}
    assert (run["state"], run["attempts"]) == ("pending", 1)
    code, out = galley(env, "runs")  # the table says what it counts: every model call
    assert code == 0 and "model calls" in out and "attempts" not in out
    code, out = galley(env, "runs", "--state", "succeeded", "--json")
    assert json.loads(out) == {"runs": []}


@pytest.mark.parametrize(
    "args",
    [
        ["draft", "no-such-recipe"],
        ["draft", "weekly-update", "--slot", "2026-11-23T10:00"],
        ["draft", "weekly-update", "--slot", "yesterday"],
        ["bump", "no-such-recipe"],
        ["pause", "no-such-recipe"],
        ["runs", "--state", "confused"],
    ],
)
def test_usage_errors_exit_2_without_a_traceback(env: dict[str, str], args: list[str]) -> None:
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_a_bad_config_file_exits_2_naming_each_problem(env: dict[str, str], tmp_path: Path) -> None:
    text = config_text().replace("Europe/London", "Mars/Olympus").replace("0 9 * * mon", "9am")
    Path(env["GALLEY_CONFIG"]).write_text(text)
    result = CliRunner().invoke(app, ["status"], env=env)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "[defaults]: timezone: unknown time zone 'Mars/Olympus'",
        "recipe 'weekly-update': schedule: bad cron '9am': want 5 fields (minute hour day month "
        "weekday)",
    ]


def test_draft_needs_an_api_key(env: dict[str, str]) -> None:
    env = {**env, "ANTHROPIC_API_KEY": ""}
    result = CliRunner().invoke(app, ["draft", "weekly-update"], env=env)
    assert result.exit_code == 2
    assert "ANTHROPIC_API_KEY" in result.stderr


# Loaded by the bot, a draft or a notebook, never by a read: each costs a `galley status`
# a tenth of a second or more on a busy machine (bench/cli_startup.py).
NOT_FOR_READS = (
    "anthropic",
    "httpx",
    "httpx2",
    "rapidfuzz",
    "slack_sdk",
    "slack_bolt",
    "apscheduler",
    "uvicorn",
    "starlette",
    "prometheus_client",
    "alembic",
)


@pytest.mark.parametrize(
    "command", [["status"], ["runs"], ["show", "weekly-update@2026-11-23T09:00"]]
)
def test_read_commands_load_the_database_layer_only(
    env: dict[str, str], command: list[str]
) -> None:
    galley(env, "draft", "weekly-update", "--slot", "2026-11-23T09:00")  # a migrated database
    script = (
        "import sys\n"
        "from bot.launch import main\n"
        f"sys.argv = ['galley', *{command!r}]\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        f"print(sorted(m for m in {NOT_FOR_READS!r} if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=galley_env(**env), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
def test_help_loads_no_database_layer() -> None:
    script = (
        "import sys\n"
        "from bot.launch import main\n"
        "sys.argv = ['galley', '--help']\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        f"heavy = ('sqlalchemy', 'sqlmodel', 'pydantic', *{NOT_FOR_READS!r})\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_a_command_runs_with_the_cyclic_collector_on_and_the_bot_serves_with_it(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """main() holds the collector off only while a command imports its modules (it would
    scan every new module object ~200 times): the command's own work, and above all the
    long-running bot, must collect cycles again."""
    import gc
    import os

    import bot.logs
    import bot.run
    from core.api import status_read

    seen: dict[str, bool] = {}
    real_status = status_read.read_status

    def status(*args: Any) -> Any:
        seen["status"] = gc.isenabled()
        return real_status(*args)

    class Bot:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def serve(self, started: Any = None) -> int:
            seen["serve"] = gc.isenabled()
            return 0

    class Exited(Exception):
        pass

    def leave(code: int) -> None:
        raise Exited(code)

    galley(env, "draft", "weekly-update", "--slot", "2026-11-23T09:00")  # a migrated database
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(status_read, "read_status", status)
    monkeypatch.setattr(bot.run, "Bot", Bot)
    # the bot's root handler would write to this test's captured stderr, closed after it,
    # and every later test's log line in this worker would fail to be written
    monkeypatch.setattr(bot.logs, "configure_logging", lambda *args: None)
    monkeypatch.setattr(os, "_exit", leave)
    try:
        for argv in (["galley", "status"], ["galley", "run"]):
            monkeypatch.setattr(sys, "argv", argv)
            with pytest.raises((SystemExit, Exited)):
                from bot.launch import main

                main()
    finally:
        gc.unfreeze()
        gc.enable()
    assert seen == {"status": True, "serve": True}
