"""Galley for notebooks: one collision-free import for the operator API.

    import galley
    g = galley.connect()          # GALLEY_CONFIG, GALLEY_DATABASE_URL, GALLEY_USER
    g.status()                    # tables in Jupyter, text in a terminal
    d = g.show(g.drafts()[0].key)
    g.approve(d)                  # as an approver, exactly the revision shown
    g.plots.decision_rates()      # a matplotlib figure

The distribution's `core` and `bot` packages are Galley's internals; use this module.
It never starts the bot and needs no Slack token. With `SLACK_BOT_TOKEN` set, user
groups (S…) in `approvers` and `admins` are looked up in Slack, as the bot does.
"""

from __future__ import annotations

import os
from typing import Any

from core.config import Config, Recipe, load_config
from core.errors import GalleyError, NotPermitted, RevisionRequired, UnknownRecipe, UnknownRun
from core.operator import ALL, Galley
from core.policies import DraftOutcome
from core.ports import Clock, Directory
from core.resolution import Finding
from core.settings import Settings
from core.states import DraftState, EffectState, RunState
from core.views import (
    Answer,
    AttemptList,
    DraftDetail,
    DraftList,
    EffectList,
    EventList,
    RunList,
    Status,
)

USER_VARIABLE = "GALLEY_USER"

__all__ = [
    "ALL",
    "USER_VARIABLE",
    "Answer",
    "AttemptList",
    "Config",
    "DraftDetail",
    "DraftList",
    "DraftOutcome",
    "DraftState",
    "EffectList",
    "EffectState",
    "EventList",
    "Finding",
    "Galley",
    "GalleyError",
    "NotPermitted",
    "Recipe",
    "RevisionRequired",
    "RunList",
    "RunState",
    "Status",
    "UnknownRecipe",
    "UnknownRun",
    "connect",
    "load_config",
]


def connect(
    user: str | None = None,
    *,
    settings: Settings | None = None,
    directory: Directory | None = None,
    clock: Clock | None = None,
) -> Galley:
    """Open Galley as a person: `user` (a Slack user id), else `GALLEY_USER`. Reading
    needs nobody; deciding needs an approver, running Galley an admin; without a user
    it only reads."""
    settings = settings or Settings()
    person = user or os.environ.get(USER_VARIABLE) or None
    if directory is None and settings.slack_bot_token:
        directory = _slack_directory(settings)
    _show_figures_inline()
    return Galley.from_settings(
        settings, clock=clock, user=person, directory=directory, as_person=True
    )


def _slack_directory(settings: Settings) -> Directory:
    from slack_sdk import WebClient

    from bot.slack_surface import SlackDirectory

    assert settings.slack_bot_token is not None
    client = WebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.galley_slack_api_url,
        retry_handlers=[],
    )
    directory: Directory = SlackDirectory(client)
    return directory


def _show_figures_inline() -> None:
    """Plots are built without pyplot, so ask IPython (when running in it) to render
    returned figures as PNG, as the inline backend does for pyplot's."""
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import select_figure_formats
    except ImportError:
        return
    shell: Any = get_ipython()
    if shell is not None:
        select_figure_formats(shell, {"png"})  # type: ignore[no-untyped-call]
