"""`galley check --online` for the whole deployment: Slack's `auth.test`, then every
publish target's credentials proved by core
(`core/publishing/platforms/online_check.py`). Nothing is posted.
"""

from __future__ import annotations

from slack_sdk import WebClient

from bot.slack_check import TOKEN_VARIABLE, check_slack
from bot.slack_surface import SlackChannels
from bot.wiring import Publishers
from core.errors import GalleyError
from core.publishing.platforms.online_check import CredentialProof, prove_targets
from core.setup.config import Config
from core.setup.settings import Settings, load_settings

SLACK = "slack"
ANTHROPIC = "anthropic"
CHECK_TIMEOUT = 10  # seconds for one auth.test


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
