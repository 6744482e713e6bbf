"""Environment variables (DESIGN.md §5): secrets and where things are; nothing else."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


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
