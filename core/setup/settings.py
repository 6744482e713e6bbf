"""Environment variables (docs/design.md §15): secrets and where things are; nothing else.

Read with pydantic alone, which the config needs anyway: pydantic-settings would add
a fifth of `galley status`'s start-up (bench/cli_startup.py) to read a dozen plain
variables. What it did for them is done here: a field is the variable of the same
name in any case, a value given to the constructor wins over the environment, and a
bad value is a validation error naming the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from core.errors import ConfigError
from core.policies import LogFormat, LogLevel


class Settings(BaseModel):
    """Read from the environment; each field is the variable of the same name."""

    model_config = ConfigDict(extra="ignore", validate_default=True)

    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    galley_github_token: SecretStr | None = None  # `github` sources: optional (docs/design.md §26)
    galley_config: Path = Path("galley.toml")
    galley_database_url: str = "sqlite:///galley.db"
    galley_slack_api_url: str = "https://slack.com/api/"
    # loopback unless the operator opens it: /metrics and /readyz are for this machine,
    # a container's network or a load balancer that is told where (docs/design.md §34)
    galley_http_host: str = "127.0.0.1"
    galley_http_port: int = 3000
    galley_log_format: LogFormat = LogFormat.TEXT
    galley_log_level: LogLevel = LogLevel.INFO

    @model_validator(mode="before")
    @classmethod
    def _from_environment(cls, given: Any) -> Any:
        """Each field not given to the constructor, from its variable (any case)."""
        if not isinstance(given, Mapping):
            return given
        return {**environment_values(cls.model_fields), **given}

    @field_validator("galley_log_format", "galley_log_level", mode="before")
    @classmethod
    def _lower_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    def resolved(self, base: Path) -> Settings:
        """These settings with a relative GALLEY_CONFIG and a relative SQLite file in
        GALLEY_DATABASE_URL made absolute against `base`, so that what was opened can
        be named, and found again from anywhere."""
        config = (
            self.galley_config if self.galley_config.is_absolute() else base / self.galley_config
        )
        url = sqlite_url_against(self.galley_database_url, base)
        return self.model_copy(update={"galley_config": config, "galley_database_url": url})


def environment_values(fields: Mapping[str, object]) -> dict[str, str]:
    """The variables named by `fields`, matched without regard to case (as a shell
    user may write GALLEY_CONFIG or galley_config); an unset one is left out, so its
    default holds."""
    by_name = {name.lower(): value for name, value in os.environ.items()}
    return {field: by_name[field] for field in fields if field in by_name}


def sqlite_url_against(url: str, base: Path) -> str:
    """A SQLite URL whose file path is relative, made absolute against `base`; any
    other URL (PostgreSQL, an in-memory or `file:` URI database) as it was."""
    path = sqlite_file(url)
    if path is None or path.is_absolute():
        return url
    import sqlalchemy as sa

    return sa.make_url(url).set(database=str(base / path)).render_as_string(hide_password=False)


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; None for other databases and in-memory ones."""
    import sqlalchemy as sa

    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        return None  # the store explains a malformed URL, naming GALLEY_DATABASE_URL
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    if database.startswith("file:") or parsed.query.get("uri"):
        return None
    return Path(database)


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
