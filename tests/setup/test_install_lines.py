"""The install lines a newcomer copies: the bot installs runtime
pins only, the tests add the dev pins, CI runs the README's own test command, the lock
commands in the README are the ones that made the locks, and nothing installs the
unrelated PyPI package called `galley` or names a package index."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.harness.processes import REPO

README = (REPO / "README.md").read_text()
LOCKS = ("requirements.lock", "requirements-dev.lock")
DEV_ONLY = (
    "pytest",
    "mypy",
    "ruff",
    "hypothesis",
    "matplotlib",
    "pandas",
    "jupyterlab",
    "nbclient",
)


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)


def pins(name: str) -> dict[str, str]:
    lines = (REPO / name).read_text().splitlines()
    return dict(line.split("==", 1) for line in lines if "==" in line and not line.startswith("#"))


def test_ci_ends_with_the_readmes_test_command_word_for_word() -> None:
    [test_command] = [
        b.strip() for b in sh_blocks(README) if b.strip().endswith(".venv/bin/pytest")
    ]
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == test_command
    assert "-r requirements.lock -r requirements-dev.lock" in test_command
    lint = next(i for i, line in enumerate(ci) if line.startswith(".venv/bin/ruff"))
    assert any("requirements-dev.lock" in line for line in ci[:lint])  # ruff, mypy: dev pins


def test_the_bot_installs_runtime_pins_only() -> None:
    [run_command] = [b.strip() for b in sh_blocks(README) if b.strip().endswith("galley run")]
    assert "-r requirements.lock -e ." in run_command and "requirements-dev" not in run_command
    runtime, dev = pins("requirements.lock"), pins("requirements-dev.lock")
    assert not [name for name in DEV_ONLY if name in runtime]
    assert all(name in dev for name in DEV_ONLY)
    assert {name: dev[name] for name in runtime} == runtime  # the same versions for both
    assert {"atproto", "mastodon-py"} <= set(runtime)  # publishing is the bot's job


def test_the_readmes_command_table_names_every_command_of_galley() -> None:
    from typer.main import get_command

    from bot.cli import app

    group = get_command(app)
    commands = set(group.list_commands(None))  # type: ignore[attr-defined, arg-type]
    rows = [line for line in README.splitlines() if line.startswith("| `galley ")]
    named = {name for row in rows for name in re.findall(r"`galley ([a-z]+)", row.split(" | ")[0])}
    assert commands - named == set()


def test_the_readmes_lock_commands_are_the_ones_that_made_the_locks() -> None:
    commands = [
        line.strip()
        for block in sh_blocks(README)
        for line in block.splitlines()
        if line.startswith("uv pip compile")
    ]
    for lock in LOCKS:
        header = (REPO / lock).read_text().splitlines()[1].lstrip("# ").strip()
        assert header.endswith(f"-o {lock}")
        assert header in commands, (lock, header)


def test_no_install_line_fetches_the_pypi_package_named_galley() -> None:
    notebook = json.loads((REPO / "examples" / "operator.ipynb").read_text())
    markdown = "".join("".join(c["source"]) for c in notebook["cells"])
    for text in (README, markdown):
        for line in text.splitlines():
            for command in line.split("&&"):
                if "pip install" in command:
                    packages = [w.strip("'\"`") for w in command.split("pip install", 1)[1].split()]
                    assert not [p for p in packages if re.match(r"galley\b", p)], command
        assert "uv pip install -p .venv -c requirements-dev.lock -e '.[notebook]'" in text


@pytest.mark.slow
def test_no_committed_file_names_a_package_index() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in tracked:
        path = REPO / name
        if (
            path.suffix in (".png", ".jpg")
            or not path.is_file()
            or name == "tests/setup/test_install_lines.py"
        ):
            continue  # this file names the markers it looks for
        text = path.read_text(errors="ignore")
        for marker in ("--index-url", "extra-index-url", "--find-links", "find-links ="):
            assert marker not in text, (name, marker)


@pytest.mark.slow
def test_an_operators_config_and_secrets_are_ignored_by_git() -> None:
    ignored = subprocess.run(
        ["git", "check-ignore", "galley.toml", ".env"], cwd=REPO, capture_output=True, text=True
    ).stdout.split()
    assert ignored == ["galley.toml", ".env"]
