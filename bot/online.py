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
from core.setup.settings import load_settings

SLACK = "slack"
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
    publishers = Publishers(SlackChannels(client))
    try:
        return [slack, *prove_targets(config, publishers.publishers_for)]
    finally:
        publishers.close()


def _auth_test(client: WebClient) -> CredentialProof:
    try:
        answer = check_slack(client)
    except GalleyError as exc:
        return CredentialProof(SLACK, False, str(exc))
    return CredentialProof(
        SLACK, True, f"auth.test: {answer.get('user') or 'the bot'} in {answer.get('team') or '?'}"
    )
