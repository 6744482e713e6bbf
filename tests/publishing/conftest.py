"""Fixtures the publishing tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.bluesky import FakeBluesky
from tests.fakes.mastodon import FakeMastodon
from tests.harness.slow_marks import starts_a_server
from tests.harness.two_platforms import Platforms


@pytest.fixture
@starts_a_server
def platforms() -> Iterator[Platforms]:
    with FakeBluesky() as bluesky, FakeMastodon() as mastodon:
        yield Platforms(bluesky, mastodon)
