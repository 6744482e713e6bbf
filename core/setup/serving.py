"""What a config needs of this machine before it can publish: each target's credential
variable set and its platform's client library importable, and each source's `secret_env`
set. `galley check` and `galley run` both refuse, one line per target or source, rather
than fail at the first approved post or read. Nothing here imports a client: a look at
the installed packages is enough.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

from core.setup.config import Config
from core.sources.source_secrets import missing_source_secret
from core.sources.specs import FeedSource, UrlSource

CLIENTS = {"bluesky": ("atproto_client", "atproto"), "mastodon": ("mastodon", "Mastodon.py")}
"""A platform's client, as (module imported, package installed); LinkedIn, Discord, Slack
and webhooks need none beyond the bot's own (httpx)."""

REINSTALL = "install the bot's pinned requirements (uv pip install -r requirements.lock)"


def unserved(config: Config, environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per publish target this machine cannot serve (its secret is unset, or its
    client is not installed) and per source whose credential variable is unset."""
    return (
        config.missing_secrets(environ)
        + missing_clients(config)
        + missing_source_secrets(config, environ)
    )


def missing_source_secrets(config: Config, environ: Mapping[str, str] | None = None) -> list[str]:
    lines = []
    for recipe in config.recipes.values():
        for number, source in enumerate(recipe.sources, start=1):
            if isinstance(source, FeedSource | UrlSource):
                missing = missing_source_secret(source, environ)
                if missing:
                    where = f"sources[{number}] ({source.label})"
                    lines.append(f"recipe {recipe.name!r}: {where}: {missing}")
    return lines


def missing_clients(config: Config) -> list[str]:
    lines = []
    for recipe in config.recipes.values():
        for target in recipe.targets:
            client = CLIENTS.get(target.to)
            if client is not None and not installed(client[0]):
                lines.append(
                    f"recipe {recipe.name!r}: publish: {target.target} needs the "
                    f"{client[1]} client, which is not installed: {REINSTALL}"
                )
    return lines


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that is not a package; a module set to None
        return False
