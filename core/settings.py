"""Environment variables (docs/design.md §15): secrets and where things are; nothing else."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.errors import ConfigError
from core.policies import LogFormat, LogLevel


class Settings(BaseSettings):
    """Read from the environment; each field is the variable of the same name."""

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore")

    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    galley_config: Path = Path("galley.toml")
    galley_database_url: str = "sqlite:///galley.db"
    galley_slack_api_url: str = "https://slack.com/api/"
    galley_http_port: int = 3000
    galley_log_format: LogFormat = LogFormat.TEXT
    galley_log_level: LogLevel = LogLevel.INFO

    @field_validator("galley_log_format", "galley_log_level", mode="before")
    @classmethod
    def _lower_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


def load_settings() -> Settings:
    """The environment's settings; a bad value is a `ConfigError` naming its variable."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            variable = str(error["loc"][0]).upper() if error["loc"] else "environment"
            problems.append(f"{variable}: {error['msg']} (got {error.get('input')!r})")
        raise ConfigError(problems) from None
