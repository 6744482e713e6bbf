"""The `galley` executable (bot/launch.py): a plain `status` line is answered before the
typer app is built, and says exactly what the app's `status` says."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.launch import main, status_line
from tests.conftest import config_text
from tests.harness.processes import galley_env


@pytest.fixture
def env(tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    config = tmp_path / "galley.toml"
    config.write_text(config_text(pending_limit=1))
    values = {"GALLEY_CONFIG": str(config), "GALLEY_DATABASE_URL": db_url}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "")  # so that the undo removes it:
    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS")  # the quick path sets it
    return values


@pytest.fixture
def collector_restored() -> Iterator[None]:
    """main() holds the collector off and freezes what start-up built; put it back."""
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (["status"], (False, False)),
        (["status", "--json"], (False, True)),
        (["--debug", "status"], (True, False)),
        (["--debug", "status", "--json"], (True, True)),
        (["status", "--help"], None),
        (["status", "--json", "--json"], None),
        (["status", "extra"], None),
        (["--json", "status"], None),
        (["runs"], None),
        (["--help"], None),
        ([], None),
    ],
)
def test_only_a_plain_status_line_is_answered_before_the_app(
    arguments: list[str], line: tuple[bool, bool] | None
) -> None:
    assert status_line(arguments) == line


def launched(
    arguments: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["galley", *arguments])
    with pytest.raises(SystemExit) as exit:
        main()
    captured = capsys.readouterr()
    return int(exit.value.code or 0), captured.out, captured.err


@pytest.mark.parametrize("arguments", [["status"], ["status", "--json"]])
@pytest.mark.usefixtures("collector_restored")
def test_the_quick_status_prints_what_the_apps_status_prints(
    env: dict[str, str],
    arguments: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = launched(arguments, monkeypatch, capsys)
    result = CliRunner().invoke(app, arguments, env=env)
    assert (code, out, err) == (result.exit_code, result.stdout, result.stderr)
    assert code == 0 and "weekly-update" in out


@pytest.mark.usefixtures("collector_restored")
def test_the_quick_status_ends_an_error_as_the_app_does(
    env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = {"GALLEY_CONFIG": str(tmp_path / "nowhere.toml")}
    monkeypatch.setenv("GALLEY_CONFIG", missing["GALLEY_CONFIG"])
    code, out, err = launched(["status"], monkeypatch, capsys)
    result = CliRunner().invoke(app, ["status"], env=missing)
    assert (code, out, err) == (result.exit_code, result.stdout, result.stderr)
    assert code == 2 and "nowhere.toml" in err


@pytest.mark.slow
def test_the_quick_status_loads_no_typer_click_or_pydantic_settings(
    env: dict[str, str],
) -> None:
    script = (
        "import sys\n"
        "from bot.launch import main\n"
        "sys.argv = ['galley', 'status']\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "heavy = ('typer', 'click', 'pydantic_settings', 'bot.cli', 'core.ports')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=galley_env(**env), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(("interruption", "exit_code"), [(KeyboardInterrupt, 130), (EOFError, 1)])
@pytest.mark.usefixtures("collector_restored")
def test_an_interrupted_quick_status_ends_as_the_app_ends_it(
    env: dict[str, str],
    interruption: type[BaseException],
    exit_code: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import bot.cli
    import bot.cli_status

    def interrupted() -> None:
        raise interruption

    monkeypatch.setattr(bot.cli_status, "read_status", interrupted)
    monkeypatch.setattr(bot.cli, "read_status", interrupted)
    code, out, err = launched(["status"], monkeypatch, capsys)
    result = CliRunner().invoke(app, ["status"], env=env)
    assert (code, out, err) == (result.exit_code, result.stdout, result.stderr)
    assert code == exit_code
