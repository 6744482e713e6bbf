"""Environment variables (core/setup/settings.py, docs/design.md §15): read as
pydantic-settings read them, without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError
from core.policies import LogFormat, LogLevel
from core.setup.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def bare_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)


def test_each_field_is_its_variable_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GALLEY_CONFIG", "/etc/galley.toml")
    monkeypatch.setenv("galley_http_port", "4000")
    monkeypatch.setenv("Anthropic_Api_Key", "sk-test")
    monkeypatch.setenv("GALLEY_LOG_LEVEL", " DEBUG ")
    monkeypatch.setenv("GALLEY_UNRELATED", "ignored")
    settings = load_settings()
    assert settings.galley_config == Path("/etc/galley.toml")
    assert settings.galley_http_port == 4000
    assert settings.anthropic_api_key is not None
    assert settings.anthropic_api_key.get_secret_value() == "sk-test"
    assert settings.galley_log_level == LogLevel.DEBUG
    assert not hasattr(settings, "galley_unrelated")


def test_an_unset_variable_keeps_its_default() -> None:
    settings = load_settings()
    assert settings.galley_config == Path("galley.toml")
    assert settings.galley_database_url == "sqlite:///galley.db"
    assert settings.galley_log_format == LogFormat.TEXT
    assert settings.slack_bot_token is None


def test_a_value_given_to_the_constructor_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GALLEY_DATABASE_URL", "sqlite:///from-env.db")
    monkeypatch.setenv("GALLEY_HTTP_PORT", "4000")
    settings = Settings(galley_database_url="sqlite:///given.db")
    assert settings.galley_database_url == "sqlite:///given.db"
    assert settings.galley_http_port == 4000  # the rest still from the environment


def test_a_bad_value_is_a_config_error_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GALLEY_HTTP_PORT", "three thousand")
    with pytest.raises(ConfigError, match=r"GALLEY_HTTP_PORT: .*'three thousand'"):
        load_settings()


def test_the_http_server_listens_on_loopback_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GALLEY_HTTP_HOST", raising=False)
    assert Settings().galley_http_host == "127.0.0.1"
    monkeypatch.setenv("GALLEY_HTTP_HOST", "0.0.0.0")
    assert Settings().galley_http_host == "0.0.0.0"
