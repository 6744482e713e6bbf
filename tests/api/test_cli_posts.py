"""`galley post` and `galley import` (docs/design.md §37): the person named by `--as` is the
writer the decision log keeps; a plan with a bad row is refused with its line number and
exit 1, nothing added. In process through typer, against the fake Anthropic API (which
must receive nothing). Both backends. No row here has a time: the command line's clock is
the system's, and these outcomes must not depend on the date.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic

RECIPE = "weekly-update"


@pytest.fixture
def env(tmp_path: Path, db_url: str, fake_anthropic: FakeAnthropic) -> dict[str, str]:
    config = tmp_path / "galley.toml"
    config.write_text(config_text())
    return {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": db_url,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
    }


def galley(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout


def test_galley_post_writes_the_post_as_the_person_named_and_once(
    env: dict[str, str], tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    text = tmp_path / "post.txt"
    text.write_text("Our office moves on Friday.\n")
    code, out = galley(env, "post", RECIPE, "--text-file", str(text), "--as", "U0ALICE", "--json")
    assert code == 0
    [run] = json.loads(out)["added"]
    assert run.startswith(f"{RECIPE}@post:h-")
    code, out = galley(env, "post", RECIPE, "--text-file", str(text), "--as", "U0ALICE", "--json")
    assert (code, json.loads(out)["added"], json.loads(out)["already"]) == (0, [], [run])

    code, out = galley(env, "decisions", "--json")
    assert code == 0
    decided = json.loads(out)
    rows = decided if isinstance(decided, list) else decided["decisions"]
    assert [(d["decision"], d["who"], d["run_id"]) for d in rows] == [("post", "U0ALICE", run)]
    code, out = galley(env, "show", run, "--json")
    assert code == 0 and "Our office moves on Friday." in out
    assert fake_anthropic.requests == []


def test_galley_import_refuses_a_plan_with_a_bad_row_naming_its_line(
    env: dict[str, str], tmp_path: Path
) -> None:
    plan = tmp_path / "plan.csv"
    plan.write_text(
        "publish_at,recipe,text\n"
        "tomorrow at nine,weekly-update,Text\n"
        '2030-01-01T09:00,no-such-recipe,"Two\nlines"\n'
        ",weekly-update,No time\n"
    )
    code, out = galley(env, "import", str(plan))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("line 2: time 'tomorrow at nine' is not an ISO time")
    assert lines[1] == "line 3: unknown recipe 'no-such-recipe'"
    assert lines[2] == "line 5: no publish_at"
    assert lines[3].startswith("nothing added: 3 bad rows")
    code, out = galley(env, "runs", "--json")
    assert "@post:" not in out
