"""A recipe's `sources` entries (docs/design.md §26): one model per kind, told apart by
`kind`, every one with a `name` (defaulted from what it reads), `required` and
`max_items`. `api`/`url` point a kind at a self-hosted server or a local fake, and never
hold a credential: a `feed` or `url` source names the variable holding it (`secret_env`)."""

from __future__ import annotations

import re
from abc import abstractmethod
from pathlib import PurePosixPath
from typing import Annotated, ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.policies import GithubItems, SourceKind
from core.sources.url_credentials import credential_in_url

HTTP_URL_PATTERN = r"^https?://[^\s/?#]+"
REPO_PATTERN = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"
CHANNEL_PATTERN = r"^[CG][A-Z0-9]+$"
GITHUB_API = "https://api.github.com"
MAX_ITEMS_DEFAULT = 20
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
HEADER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]*$"


class _SourceBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, pattern=r"^[^\s|][^|]*$", max_length=64)
    required: bool = True
    max_items: int = Field(default=MAX_ITEMS_DEFAULT, ge=1, le=500)

    # What to do instead of writing a credential into this kind's configured URLs.
    credential_instead: ClassVar[str] = "leave it out"

    @property
    def label(self) -> str:
        """The source's name as people see it: `name`, or one derived from what it reads."""
        return self.name or self.default_name()

    def configured_urls(self) -> dict[str, str]:
        """The URLs the operator wrote, by key: never to hold a credential."""
        return {}

    @model_validator(mode="after")
    def _no_credential_in_urls(self) -> Self:
        """A credential in a configured URL would be stored and shown with every item:
        refused, naming the source, the key and what holds it, never the secret."""
        for key, url in self.configured_urls().items():
            found = credential_in_url(url)
            if found is not None:
                raise ValueError(
                    f"{key} of source {self.label!r} holds {found}: {self.credential_instead}"
                )
        return self

    @abstractmethod
    def default_name(self) -> str:
        """The name a source of this kind goes by when it is given none."""


class _WebSource(_SourceBase):
    """A source read from a configured URL, with the credential it may need: the value of
    the variable `secret_env` names, sent as `Authorization: Bearer <value>`, or as the
    header `secret_header` names, as it is."""

    url: str = Field(pattern=HTTP_URL_PATTERN)
    secret_env: str | None = Field(default=None, pattern=ENV_NAME_PATTERN)
    secret_header: str | None = Field(default=None, pattern=HEADER_NAME_PATTERN)

    credential_instead: ClassVar[str] = "name the variable holding it in secret_env instead"

    def configured_urls(self) -> dict[str, str]:
        return {"url": self.url}

    @model_validator(mode="after")
    def _header_with_its_secret(self) -> _WebSource:
        if self.secret_header is not None and self.secret_env is None:
            raise ValueError("secret_header needs secret_env, the variable holding its value")
        return self


class FeedSource(_WebSource):
    kind: Literal[SourceKind.FEED]

    def default_name(self) -> str:
        return urlsplit(self.url).hostname or "feed"


class GithubSource(_SourceBase):
    kind: Literal[SourceKind.GITHUB]
    repo: str = Field(pattern=REPO_PATTERN)
    items: tuple[GithubItems, ...] = (GithubItems.RELEASES, GithubItems.MERGED_PULLS)
    api: str = Field(default=GITHUB_API, pattern=HTTP_URL_PATTERN)

    credential_instead: ClassVar[str] = "set GALLEY_GITHUB_TOKEN, sent as a header, instead"

    def configured_urls(self) -> dict[str, str]:
        return {"api": self.api}

    @field_validator("items")
    @classmethod
    def _some_items(cls, items: tuple[GithubItems, ...]) -> tuple[GithubItems, ...]:
        if not items:
            raise ValueError('name at least one of "releases", "merged_pulls"')
        return items

    def default_name(self) -> str:
        return self.repo


class SlackSource(_SourceBase):
    kind: Literal[SourceKind.SLACK]
    channel: str = Field(pattern=CHANNEL_PATTERN)
    api: str | None = Field(default=None, pattern=HTTP_URL_PATTERN)  # None: GALLEY_SLACK_API_URL

    credential_instead: ClassVar[str] = "the bot's own token is sent as a header: leave it out"

    def configured_urls(self) -> dict[str, str]:
        return {} if self.api is None else {"api": self.api}

    def default_name(self) -> str:
        return f"#{self.channel}"


class UrlSource(_WebSource):
    kind: Literal[SourceKind.URL]

    def default_name(self) -> str:
        return urlsplit(self.url).hostname or "page"


class FileSource(_SourceBase):
    kind: Literal[SourceKind.FILE]
    path: str = Field(min_length=1)  # a glob, relative to the config file's folder

    @field_validator("path")
    @classmethod
    def _beside_the_config(cls, path: str) -> str:
        pure = PurePosixPath(path)
        if pure.is_absolute() or re.match(r"^[A-Za-z]:", path) or ".." in pure.parts:
            raise ValueError("must be a path beside the config file (relative, without ..)")
        return path

    def default_name(self) -> str:
        return self.path


SourceSpec = Annotated[
    FeedSource | GithubSource | SlackSource | UrlSource | FileSource,
    Field(discriminator="kind"),
]

SOURCE_MODELS: dict[SourceKind, type[_SourceBase]] = {
    SourceKind.FEED: FeedSource,
    SourceKind.GITHUB: GithubSource,
    SourceKind.SLACK: SlackSource,
    SourceKind.URL: UrlSource,
    SourceKind.FILE: FileSource,
}
