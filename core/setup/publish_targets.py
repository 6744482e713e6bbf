"""The `publish` key's target tables (docs/design.md §15): one model per platform, each
naming its target id inside effect keys. A credential is read from the environment when
it is needed, never from the file.
"""

from __future__ import annotations

import os
import re
from abc import abstractmethod
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from core.errors import MissingSecret
from core.identity import slack_target
from core.setup.durations import ZeroOrDuration

ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HANDLE_PATTERN = re.compile(
    r"^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z][A-Za-z0-9-]*$"
)
DID_PATTERN = re.compile(r"^did:[a-z]+:[A-Za-z0-9._:%-]+$")
BASE_URL_PATTERN = re.compile(r"^https?://[^\s/?#|]+(/[^\s?#|]*)?$")


# How long after a send whose answer was lost a destination read by its listing shows
# the post (docs/design.md §9): the request may still be running there, and a listing
# may be served by a replica behind the primary. Before then "absent" is not believed.
MASTODON_READ_DELAY = timedelta(minutes=1)
LINKEDIN_READ_DELAY = timedelta(minutes=2)
# Discord lists a channel's messages at once, and a resend within the nonce's window
# returns the message a lost answer made: nothing to wait for.
DISCORD_READ_DELAY = timedelta(0)
SNOWFLAKE_PATTERN = re.compile(r"^\d{1,20}$")
THREADS_READ_DELAY = timedelta(minutes=1)


def _base_url(url: str) -> str:
    """An http(s) base URL with no query or fragment, without its trailing slash."""
    if not BASE_URL_PATTERN.match(url):
        raise ValueError(f"not an http(s) base URL: {url!r}")
    return url.rstrip("/")


# an http(s) base URL a platform's calls are joined onto (a self-hosted server or a fake)
BaseUrl = Annotated[str, AfterValidator(_base_url)]


class _Target(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @property
    def lookup_grace(self) -> timedelta:
        """How long after a lost answer a look-up is believed: none where the post is
        found by its key (Slack's metadata, a webhook's status URL, Bluesky's record)."""
        return timedelta(0)


class _ListedTarget(BaseModel):
    """A destination whose look-up lists the account's posts (docs/design.md §9):
    `read_delay` in the file overrides the platform's stated delay (an instance known to
    lag more, or a test's fake that shows a post at once)."""

    read_delay: ZeroOrDuration | None = None


class SlackTarget(_Target):
    to: Literal["slack"]
    channel: str = Field(min_length=1)

    @field_validator("channel")
    @classmethod
    def _channel(cls, channel: str) -> str:
        if not re.match(r"^[^|\s]+$", channel):
            raise ValueError("a channel id has no spaces and no |")  # | separates key parts
        return channel

    @property
    def target(self) -> str:
        return slack_target(self.channel)


class WebhookTarget(_Target):
    to: Literal["webhook"]
    url: str = Field(pattern=r"^https?://")
    status_url: str | None = Field(default=None, pattern=r"^https?://")

    @property
    def target(self) -> str:
        return "webhook"


class _SecretTarget(_Target):
    """A destination whose credential is read from the environment variable `secret_env`
    (never from the file), so two accounts on one platform can name two variables."""

    secret_env: str

    @field_validator("secret_env")
    @classmethod
    def _env_name(cls, name: str) -> str:
        if not ENV_NAME_PATTERN.match(name):
            raise ValueError(f"not an environment variable name: {name!r}")
        return name

    @property
    @abstractmethod
    def target(self) -> str:
        """The target id inside effect keys; each platform's model names its own."""

    def _second_account(self) -> str:
        """`+VAR` when the target names a variable other than its platform's default, so
        a second account on the same place is a target of its own; else nothing."""
        default = type(self).model_fields["secret_env"].default
        return "" if self.secret_env == default else f"+{self.secret_env}"

    def secret(self, environ: Mapping[str, str] | None = None) -> str:
        """The credential, read when it is needed; MissingSecret names the variable."""
        value = (os.environ if environ is None else environ).get(self.secret_env, "")
        if not value.strip():
            raise MissingSecret(self.secret_env, self.target)
        return value.strip()


class BlueskyTarget(_SecretTarget):
    to: Literal["bluesky"]
    handle: str  # the account's handle (acme.bsky.social) or DID
    service: str = "https://bsky.social"  # its PDS (or a local fake)
    secret_env: str = "GALLEY_BLUESKY_PASSWORD"  # an app password

    @field_validator("handle")
    @classmethod
    def _handle(cls, handle: str) -> str:
        if not (HANDLE_PATTERN.match(handle) or DID_PATTERN.match(handle)):
            hint = " (without the @)" if handle.startswith("@") else ""
            raise ValueError(f"not a Bluesky handle like acme.bsky.social, nor a DID{hint}")
        return handle

    @field_validator("service")
    @classmethod
    def _service(cls, url: str) -> str:
        return _base_url(url)

    @property
    def target(self) -> str:
        return f"bluesky:{self.handle}"


class MastodonTarget(_SecretTarget, _ListedTarget):
    to: Literal["mastodon"]
    instance: str  # base URL: https://mastodon.social
    visibility: Literal["public", "unlisted", "private", "direct"] = "public"
    secret_env: str = "GALLEY_MASTODON_TOKEN"  # write:statuses and read:statuses

    @field_validator("instance")
    @classmethod
    def _instance(cls, url: str) -> str:
        return _base_url(url)

    @property
    def target(self) -> str:
        """`mastodon:mastodon.social`; a second account on one instance is told apart by
        its variable: `mastodon:mastodon.social+GALLEY_MASTODON_TOKEN_TEAM`."""
        host = urlsplit(self.instance)
        where = (host.netloc + host.path.rstrip("/")).lower()
        return f"mastodon:{where}{self._second_account()}"

    @property
    def lookup_grace(self) -> timedelta:
        return MASTODON_READ_DELAY if self.read_delay is None else self.read_delay


class LinkedInTarget(_SecretTarget, _ListedTarget):
    to: Literal["linkedin"]
    author: str  # urn:li:organization:N (a page) or urn:li:person:ID (a member)
    api: str = "https://api.linkedin.com/rest/"
    version: str = "202511"  # the LinkedIn-Version header: YYYYMM; versions retire after a year

    @field_validator("version")
    @classmethod
    def _version(cls, version: str) -> str:
        if not re.match(r"^\d{6}(\.\d{2})?$", version):
            raise ValueError('must be a LinkedIn API version like "202511"')
        return version

    secret_env: str = "GALLEY_LINKEDIN_TOKEN"  # w_organization_social, r_organization_social

    @field_validator("author")
    @classmethod
    def _author(cls, author: str) -> str:
        if not re.match(r"^urn:li:(organization|person):[A-Za-z0-9_-]+$", author):
            raise ValueError("must be urn:li:organization:N or urn:li:person:ID")
        return author

    @field_validator("api")
    @classmethod
    def _api(cls, url: str) -> str:
        return _base_url(url) + "/"  # paths are joined onto it: posts, posts?q=author

    @property
    def is_organization(self) -> bool:
        return self.author.startswith("urn:li:organization:")

    @property
    def target(self) -> str:
        return f"linkedin:{self.author}"

    @property
    def lookup_grace(self) -> timedelta:
        """An organization's posts are listed after LinkedIn's read delay; a member's are
        never readable, so nothing is gained by waiting."""
        if not self.is_organization:
            return timedelta(0)
        return LINKEDIN_READ_DELAY if self.read_delay is None else self.read_delay


class DiscordTarget(_SecretTarget, _ListedTarget):
    to: Literal["discord"]
    channel: str  # the channel's id (a snowflake): 1234567890123456789
    api: BaseUrl = "https://discord.com/api/v10"
    secret_env: str = "GALLEY_DISCORD_TOKEN"  # a bot token, sent as `Authorization: Bot …`

    @field_validator("channel")
    @classmethod
    def _channel(cls, channel: str) -> str:
        if not SNOWFLAKE_PATTERN.match(channel):
            raise ValueError("must be a Discord channel id (digits only: Copy Channel ID)")
        return channel

    @property
    def target(self) -> str:
        """`discord:1234567890`; a second bot on one channel is told apart by its
        variable: `discord:1234567890+GALLEY_DISCORD_TOKEN_TEAM`."""
        return f"discord:{self.channel}{self._second_account()}"

    @property
    def lookup_grace(self) -> timedelta:
        return DISCORD_READ_DELAY if self.read_delay is None else self.read_delay


class ThreadsTarget(_SecretTarget, _ListedTarget):
    """Meta's Threads (docs/design.md §24): one account by its numeric user id."""

    to: Literal["threads"]
    user: str  # the Threads user id (digits), as GET /me?fields=id answers it
    api: BaseUrl = "https://graph.threads.net/v1.0"
    secret_env: str = "GALLEY_THREADS_TOKEN"  # threads_basic, threads_content_publish

    @field_validator("user")
    @classmethod
    def _user(cls, user: str) -> str:
        if not re.match(r"^[0-9]{1,32}$", user):
            raise ValueError("must be the Threads user id (digits), not the @username")
        return user

    @property
    def target(self) -> str:
        return f"threads:{self.user}"

    @property
    def lookup_grace(self) -> timedelta:
        """A container's status is read by its id at once; the published post's id is
        found in the account's listing, which may lag like Mastodon's."""
        return THREADS_READ_DELAY if self.read_delay is None else self.read_delay


TELEGRAM_CHAT_PATTERN = re.compile(r"^(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})$")


class TelegramTarget(_SecretTarget):
    """A Telegram chat a bot posts to (docs/design.md §24): no key and no read-back, so an
    unknown answer is `uncertain` and a person decides."""

    to: Literal["telegram"]
    chat: str  # a chat id (-1001234567890) or a public channel's @username
    api: BaseUrl = "https://api.telegram.org"  # the Bot API server (or a local one, or a fake)
    secret_env: str = "GALLEY_TELEGRAM_TOKEN"  # the bot's token from @BotFather

    @field_validator("chat", mode="before")
    @classmethod
    def _chat(cls, chat: object) -> object:
        if isinstance(chat, int) and not isinstance(chat, bool):
            chat = str(chat)  # TOML may give the id as a number
        if isinstance(chat, str) and not TELEGRAM_CHAT_PATTERN.match(chat):
            raise ValueError("must be a chat id like -1001234567890 or a channel like @acme")
        return chat

    @property
    def target(self) -> str:
        """`telegram:@acme` or `telegram:-1001234567890`; a second bot in one chat is told
        apart by its variable: `telegram:@acme+GALLEY_TELEGRAM_TOKEN_TEAM`."""
        return f"telegram:{self.chat}{self._second_account()}"


PublishTarget = Annotated[
    SlackTarget
    | WebhookTarget
    | BlueskyTarget
    | MastodonTarget
    | LinkedInTarget
    | DiscordTarget
    | ThreadsTarget
    | TelegramTarget,
    Field(discriminator="to"),
]
SecretTarget = (
    BlueskyTarget | MastodonTarget | LinkedInTarget | DiscordTarget | ThreadsTarget | TelegramTarget
)


TARGETS: dict[str, type[_Target]] = {
    "slack": SlackTarget,
    "webhook": WebhookTarget,
    "bluesky": BlueskyTarget,
    "mastodon": MastodonTarget,
    "linkedin": LinkedInTarget,
    "discord": DiscordTarget,
    "threads": ThreadsTarget,
    "telegram": TelegramTarget,
}
