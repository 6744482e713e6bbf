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
from pathlib import Path
from typing import Any

from core.api.galley import ALL, Galley
from core.api.views import (
    Answer,
    AttemptList,
    DraftDetail,
    DraftList,
    EffectList,
    EventList,
    RunList,
    Status,
)
from core.drafting_policies import DraftOutcome
from core.errors import GalleyError, NotPermitted, RevisionRequired, UnknownRecipe, UnknownRun
from core.operations.resolution import Finding
from core.ports import Clock, Directory
from core.review.feedback import FeedbackList
from core.setup.config import Config, Recipe, load_config
from core.setup.settings import Settings
from core.states import DraftState, EffectState, RunState

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
    "FeedbackList",
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
    quiet: bool = False,
) -> Galley:
    """Open Galley as a person: `user` (a Slack user id), else `GALLEY_USER`. Reading
    needs nobody; deciding needs an approver, running Galley an admin; without a user
    it only reads.

    Prints one line naming the config file and the database it opened (`quiet=True`
    does not). Relative paths in GALLEY_CONFIG and GALLEY_DATABASE_URL start where
    `galley` commands would: the working directory, or in a Jupyter kernel (which runs
    in the notebook's own folder) the directory Jupyter was started from. A SQLite
    database that is not there is an error naming GALLEY_DATABASE_URL, never a new
    empty file."""
    settings = (settings or Settings()).resolved(launch_directory())
    person = user or os.environ.get(USER_VARIABLE) or None
    if directory is None and settings.slack_bot_token:
        directory = _slack_directory(settings)
    _show_figures_inline()
    galley = Galley.from_settings(
        settings,
        clock=clock,
        user=person,
        directory=directory,
        as_person=True,
        existing_database=True,
    )
    if not quiet:
        print(f"galley: {galley.opened}")
    return galley


def launch_directory() -> Path:
    """Where relative paths start. Jupyter starts a kernel in the notebook's folder
    (examples/ for the example notebook), not where the person started Jupyter and
    runs `galley`; the shell's PWD, which the kernel inherits, still says where that
    was. Anywhere else: the working directory."""
    pwd = os.environ.get("PWD")
    if pwd and _in_kernel() and Path(pwd).is_dir():
        return Path(pwd)
    return Path.cwd()


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell: Any = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


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
