"""A world publishing to two platforms at once, Bluesky then Mastodon, over their fakes:
what the several-targets tests share (docs/design.md §24)."""

from __future__ import annotations

from dataclasses import dataclass

from core.identity import publish_effect_key
from tests.fakes.bluesky import HANDLE, PASSWORD, FakeBluesky, did_of
from tests.fakes.mastodon import TOKEN, FakeMastodon
from tests.harness.worlds import KEY, MakeWorld, World

BLUESKY = f"bluesky:{HANDLE}"
ENV = {"GALLEY_BLUESKY_PASSWORD": PASSWORD, "GALLEY_MASTODON_TOKEN": TOKEN}


@dataclass
class Platforms:
    bluesky: FakeBluesky
    mastodon: FakeMastodon

    @property
    def publish(self) -> str:
        return (
            f'publish = [{{ to = "bluesky", handle = "{HANDLE}", service = "{self.bluesky.url}" }},'
            f' {{ to = "mastodon", instance = "{self.mastodon.url}" }}]'
        )

    @property
    def mastodon_target(self) -> str:
        return f"mastodon:{self.mastodon.url.removeprefix('http://')}"

    def creates(self) -> tuple[int, int]:
        """Create requests each platform received, whatever became of them."""
        return (
            len(self.bluesky.requests_to("com.atproto.repo.createRecord")),
            len(self.mastodon.requests_to("/api/v1/statuses", "POST")),
        )

    def posts(self) -> tuple[int, int]:
        """Posts that exist on each platform."""
        return len(self.bluesky.posts_of(did_of(HANDLE))), len(self.mastodon.statuses_of())


def world_of(worlds: MakeWorld, db_url: str, platforms: Platforms) -> World:
    return worlds(db_url, publish=platforms.publish, environ=ENV)


def receipt_state(world: World, target: str) -> str | None:
    effect = world.effect(publish_effect_key(KEY, target))
    return None if effect is None else effect.state
