"""The publishers of a recipe's targets, built once per recipe and target and shared by
every worker of the process (docs/design.md §24). Core builds every destination but
Slack, which the bot supplies (`slack=`); without it a Slack target has no publisher here
(a notebook measuring fits, for one). Credentials are read when a call needs them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from core.ports import Publisher
from core.publishing.platforms.bluesky import BlueskyPublisher
from core.publishing.platforms.discord import DiscordPublisher
from core.publishing.platforms.linkedin import (
    LinkedInOrganizationPublisher,
    LinkedInPublisher,
)
from core.publishing.platforms.mastodon import MastodonPublisher
from core.publishing.platforms.threads_meta import ThreadsPublisher
from core.publishing.platforms.webhook import StatusWebhookPublisher, WebhookPublisher
from core.setup.config import Recipe
from core.setup.publish_targets import (
    BlueskyTarget,
    DiscordTarget,
    MastodonTarget,
    PublishTarget,
    SlackTarget,
    TelegramTarget,
    ThreadsTarget,
    WebhookTarget,
)

SlackPublisherFor = Callable[[SlackTarget], Publisher]


class Destinations:
    def __init__(
        self, slack: SlackPublisherFor | None = None, environ: Mapping[str, str] | None = None
    ) -> None:
        self.slack, self.environ = slack, environ
        self._built: dict[tuple[str, str], Publisher | None] = {}
        self._lock = threading.Lock()

    def __call__(self, recipe: Recipe) -> Publisher:
        """The first (or only) target's publisher, for single-target callers."""
        publishers = self.publishers_for(recipe)
        if not publishers:
            raise ValueError(f"{recipe.name} has no publish target")
        return publishers[0]

    def publishers_for(self, recipe: Recipe) -> list[Publisher]:
        """One publisher per target, in the order the recipe lists them."""
        with self._lock:
            found = []
            for target in recipe.targets:
                key = (recipe.name, target.model_dump_json())
                if key not in self._built:
                    self._built[key] = self._build(recipe, target)
                publisher = self._built[key]
                if publisher is not None:
                    found.append(publisher)
            return found

    def _build(self, recipe: Recipe, target: PublishTarget) -> Publisher | None:
        timeout = recipe.call_timeout
        if isinstance(target, SlackTarget):
            return None if self.slack is None else self.slack(target)
        if (
            isinstance(target, WebhookTarget) and target.status_url
        ):  # read back (docs/design.md §28)
            return StatusWebhookPublisher(target.url, target.status_url, timeout=timeout)
        if isinstance(target, WebhookTarget):
            return WebhookPublisher(target.url, target.status_url, timeout=timeout)
        if isinstance(target, BlueskyTarget):
            return BlueskyPublisher(target, timeout, self.environ)
        if isinstance(target, MastodonTarget):
            return MastodonPublisher(target, timeout, self.environ)
        if isinstance(target, DiscordTarget):
            return DiscordPublisher(target, timeout, self.environ)
        if isinstance(target, ThreadsTarget):
            return ThreadsPublisher(target, timeout, self.environ)
        if isinstance(target, TelegramTarget):  # imported only where a recipe names it
            from core.publishing.platforms.telegram import TelegramPublisher

            return TelegramPublisher(target, timeout, self.environ)
        if target.is_organization:  # an organization's posts are read back (docs/design.md §28)
            return LinkedInOrganizationPublisher(target, timeout, self.environ)
        return LinkedInPublisher(target, timeout, self.environ)

    def close(self) -> None:
        with self._lock:
            for publisher in self._built.values():
                close = getattr(publisher, "close", None)
                if close is not None:
                    close()
            self._built.clear()
