"""The example config (`examples/galley.toml`) passes `galley check` as shipped, and still
does with a recipe of approval stages added to it: a recipe's `approval_stages`
overrides the defaults' `approvals_required` (docs/design.md §22), and a stage's
approver need not be in `[slack] approvers`. Both keys in one table are still refused.
On both backends: `check` reads the database's migration."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from core.errors import ConfigError
from core.setup.config import parse_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "galley.toml"
STAGED_RECIPE = """
[[recipes]]
name     = "launch"
platform = "blog"
schedule = "0 10 * * tue"
prompt   = "Announce the launch."
approval_stages = [{ name = "editor", approvers = ["U0EDITOR"] },
                   { name = "legal",  approvers = ["U0LAWYER"] }]
"""


def galley_check(tmp_path: Path, db_url: str, text: str) -> tuple[int, str]:
    config = tmp_path / "galley.toml"
    config.write_text(text)
    env = {"GALLEY_CONFIG": str(config), "GALLEY_DATABASE_URL": db_url}
    env["SLACK_BOT_TOKEN"] = "xoxb-test"  # the example publishes one recipe to Slack
    result = CliRunner().invoke(app, ["check"], env=env)
    return result.exit_code, result.output


def test_the_example_config_passes_check(tmp_path: Path, db_url: str) -> None:
    code, output = galley_check(tmp_path, db_url, EXAMPLE.read_text())
    assert code == 0, output
    assert "config ok: 2 recipes" in output.lower()


def test_the_example_config_with_a_staged_recipe_passes_check(tmp_path: Path, db_url: str) -> None:
    code, output = galley_check(tmp_path, db_url, EXAMPLE.read_text() + STAGED_RECIPE)
    assert code == 0, output
    assert "config ok: 3 recipes" in output.lower()


def test_the_staged_recipe_drops_the_defaults_approvals_required_only() -> None:
    config = parse_config(EXAMPLE.read_text() + STAGED_RECIPE)
    staged = config.recipes["launch"]
    assert [s.name for s in staged.approval_stages] == ["editor", "legal"]
    assert "approvals_required" not in staged.model_fields_set
    assert "approvals_required" in config.recipes["weekly-update"].model_fields_set


def test_both_keys_in_one_recipe_table_are_still_refused() -> None:
    both = STAGED_RECIPE + "approvals_required = 2\n"
    with pytest.raises(ConfigError) as raised:
        parse_config(EXAMPLE.read_text() + both)
    said = "recipe 'launch': approval_stages: give either approval_stages or approvals_required"
    assert any(said in problem for problem in raised.value.problems), raised.value.problems
