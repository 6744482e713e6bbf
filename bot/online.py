"""`galley check --online` for the whole deployment: Slack's `auth.test`, then every
publish target's credentials proved by core
(`core/publishing/platforms/online_check.py`), then each recipe's sources read once
(`core/sources/reading.py`). Nothing is posted, drafted or stored.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from slack_sdk import WebClient

from bot.slack_check import TOKEN_VARIABLE, check_slack
from bot.slack_surface import SlackChannels
from bot.wiring import Publishers
from core.egress.way_out import Egress
from core.errors import GalleyError
from core.publishing.platforms.online_check import CredentialProof, prove_targets
from core.setup.config import Config, Recipe
from core.setup.settings import Settings, load_settings
from core.sources.items import ReadContext, Window
from core.sources.reading import SourceCheck, check_source

SLACK = "slack"
ANTHROPIC = "anthropic"
CHECK_TIMEOUT = 10  # seconds for one auth.test
CHECK_WINDOW = timedelta(
    days=7
)  # a source is read for this long before now, unless its recipe says


def prove_everything(config: Config) -> list[CredentialProof]:
    settings = load_settings()
    token = settings.slack_bot_token
    if token is None:
        slack = CredentialProof(SLACK, False, f"{TOKEN_VARIABLE} is not set")
        client = WebClient(base_url=settings.galley_slack_api_url)
    else:
        client = WebClient(
            token=token.get_secret_value(),
            base_url=settings.galley_slack_api_url,
            timeout=CHECK_TIMEOUT,
            retry_handlers=[],
        )
        slack = _auth_test(client)
    model = _anthropic_key(settings)
    publishers = Publishers(SlackChannels(client))
    try:
        return [slack, model, *prove_targets(config, publishers.publishers_for)]
    finally:
        publishers.close()


def _anthropic_key(settings: Settings) -> CredentialProof:
    """The key drafts are paid with, proved by one read that spends no tokens."""
    from core.drafting.anthropic_drafter import AnthropicDrafter

    key = settings.anthropic_api_key
    if key is None:
        return CredentialProof(ANTHROPIC, False, "ANTHROPIC_API_KEY is not set")
    drafter = AnthropicDrafter(key.get_secret_value(), settings.anthropic_base_url)
    try:
        return CredentialProof(ANTHROPIC, True, drafter.prove_key())
    except GalleyError as exc:
        return CredentialProof(ANTHROPIC, False, str(exc))


def _auth_test(client: WebClient) -> CredentialProof:
    try:
        answer = check_slack(client)
    except GalleyError as exc:
        return CredentialProof(SLACK, False, str(exc))
    return CredentialProof(
        SLACK, True, f"auth.test: {answer.get('user') or 'the bot'} in {answer.get('team') or '?'}"
    )


def check_sources(config: Config, now: datetime) -> list[SourceCheck]:
    """Each source of each recipe read once over the recipe's `window` (else the last
    7 days) up to `now`: one line each."""
    settings = load_settings()
    checks = []
    for recipe in config.recipes.values():
        window = Window.lasting(recipe.window or CHECK_WINDOW, now)
        context = read_context(settings, recipe, config)
        checks += [check_source(recipe.name, spec, window, context) for spec in recipe.sources]
    return checks


def read_context(settings: Settings, recipe: Recipe, config: Config) -> ReadContext:
    github, slack = settings.galley_github_token, settings.slack_bot_token
    return ReadContext(
        config_dir=settings.galley_config.resolve().parent,
        timeout=recipe.call_timeout.total_seconds(),
        github_token=github.get_secret_value() if github else None,
        slack_token=slack.get_secret_value() if slack else None,
        slack_api=settings.galley_slack_api_url,
        egress=Egress(config.egress),
    )
