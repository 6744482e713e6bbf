"""The `github` reader against a fake of GitHub's REST API over real HTTP: releases and
merged pull requests in the window, paging, the token, rate limits (docs/design.md §26)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from core.sources.items import SourceReadError, Window
from core.sources.reading import read_source
from tests.fakes.github import FakeGithub, rate_limited, status
from tests.harness.slow_marks import starts_a_server
from tests.sources.specs import SLOT, WEEK, context, source

REPO = "acme/widget"
DAY = timedelta(days=1)


@pytest.fixture
@starts_a_server
def github() -> Iterator[FakeGithub]:
    with FakeGithub() as fake:
        yield fake


def test_releases_and_pulls_merged_in_the_window_are_read_newest_first(github: FakeGithub) -> None:
    v2 = github.add_release(
        REPO, tag="v2.0", created=SLOT - 2 * DAY, published=SLOT - 2 * DAY, body="## Faster"
    )
    # drafted long ago, published in the window: news now
    v19 = github.add_release(REPO, tag="v1.9", created=SLOT - 20 * DAY, published=SLOT - 3 * DAY)
    github.add_release(REPO, tag="v1.8", created=SLOT - 30 * DAY, published=SLOT - 30 * DAY)
    github.add_release(REPO, tag="v3.0", created=SLOT - DAY, published=None, draft=True)
    github.add_pull(
        REPO,
        number=7,
        title="Search is faster",
        updated=SLOT - DAY,
        merged=SLOT - DAY,
        body="Details",
    )
    github.add_pull(
        REPO, number=8, title="Abandoned", updated=SLOT - DAY, merged=None, closed=SLOT - DAY
    )
    github.add_pull(REPO, number=5, title="Old", updated=SLOT - 9 * DAY, merged=SLOT - 9 * DAY)

    items = read_source(source(kind="github", repo=REPO, api=github.url), WEEK, context())

    assert [(item.item_id, item.title, item.link, item.published_at) for item in items] == [
        ("pull:7", "Search is faster", f"https://github.com/{REPO}/pull/7", SLOT - DAY),
        (f"release:{v2}", "v2.0", f"https://github.com/{REPO}/releases/tag/v2.0", SLOT - 2 * DAY),
        (f"release:{v19}", "v1.9", f"https://github.com/{REPO}/releases/tag/v1.9", SLOT - 3 * DAY),
    ]
    assert [item.text for item in items] == ["Details", "## Faster", ""]
    assert {item.source for item in items} == {REPO}


def test_items_names_what_is_read(github: FakeGithub) -> None:
    github.add_release(REPO, tag="v2.0", created=SLOT - DAY, published=SLOT - DAY)
    github.add_pull(REPO, number=7, title="Merged", updated=SLOT - DAY, merged=SLOT - DAY)

    items = read_source(
        source(kind="github", repo=REPO, api=github.url, items=["merged_pulls"]), WEEK, context()
    )

    assert [item.item_id for item in items] == ["pull:7"]
    assert all("/pulls" in request.path for request in github.requests)


def test_pages_are_followed_by_their_next_link(github: FakeGithub) -> None:
    for number in range(1, 251):
        moment = SLOT - timedelta(minutes=number)
        github.add_pull(REPO, number=number, title=f"PR {number}", updated=moment, merged=moment)

    spec = source(kind="github", repo=REPO, api=github.url, items=["merged_pulls"], max_items=500)
    items = read_source(spec, WEEK, context())

    assert len(items) == 250
    assert [request.path.split("?")[0] for request in github.requests] == [
        f"/repos/{REPO}/pulls",
        "/repositories/1296269/pulls",
        "/repositories/1296269/pulls",
    ]


def test_paging_stops_at_the_first_page_reaching_before_the_window(github: FakeGithub) -> None:
    for number in range(1, 301):
        moment = SLOT - number * timedelta(hours=4)  # 42 in the window, 300 in all
        github.add_pull(REPO, number=number, title=f"PR {number}", updated=moment, merged=moment)

    spec = source(kind="github", repo=REPO, api=github.url, items=["merged_pulls"], max_items=500)
    items = read_source(spec, WEEK, context())

    assert len(items) == 41  # 7 days / 4 hours, the window's start left out
    assert len(github.requests) == 1


def test_the_token_is_sent_and_opens_a_private_repository(github: FakeGithub) -> None:
    github.repository(REPO, token="ghp_secret")
    github.add_release(REPO, tag="v2.0", created=SLOT - DAY, published=SLOT - DAY)
    spec = source(kind="github", repo=REPO, api=github.url, name="widget")

    with pytest.raises(SourceReadError) as raised:
        read_source(spec, WEEK, context())
    items = read_source(spec, WEEK, context(github_token="ghp_secret"))

    assert raised.value.retryable is False
    assert raised.value.answer.startswith("HTTP 404 Not Found")
    assert [item.title for item in items] == ["v2.0"]
    assert github.requests[-1].headers["authorization"] == "Bearer ghp_secret"
    assert "authorization" not in github.requests[0].headers


@pytest.mark.parametrize("code", [403, 429])
def test_a_spent_rate_limit_is_retryable_and_says_when_it_resets(
    github: FakeGithub, code: int
) -> None:
    github.add_release(REPO, tag="v2.0", created=SLOT - DAY, published=SLOT - DAY)
    github.script(
        rate_limited(reset=int(datetime(2026, 3, 9, 10, 0, tzinfo=UTC).timestamp()), code=code)
    )

    with pytest.raises(SourceReadError) as raised:
        read_source(source(kind="github", repo=REPO, api=github.url), WEEK, context())

    assert raised.value.retryable is True
    assert (
        raised.value.answer
        == f"GitHub rate limit reached (HTTP {code}); it resets at 2026-03-09T10:00:00+00:00"
    )


def test_a_403_that_is_no_rate_limit_is_not_retryable(github: FakeGithub) -> None:
    github.add_release(REPO, tag="v2.0", created=SLOT - DAY, published=SLOT - DAY)
    github.script(status(403))

    with pytest.raises(SourceReadError) as raised:
        read_source(source(kind="github", repo=REPO, api=github.url), WEEK, context())

    assert raised.value.retryable is False


def test_an_unknown_repository_is_not_retryable(github: FakeGithub) -> None:
    with pytest.raises(SourceReadError) as raised:
        read_source(source(kind="github", repo="acme/missing", api=github.url), WEEK, context())

    assert raised.value.retryable is False
    assert raised.value.source == "acme/missing"
    assert "404" in raised.value.answer


def test_a_next_page_on_another_server_is_never_sent_the_token(github: FakeGithub) -> None:
    for number in range(1, 151):
        moment = SLOT - timedelta(minutes=number)
        github.add_pull(REPO, number=number, title=f"PR {number}", updated=moment, merged=moment)
    api = github.url.replace("127.0.0.1", "localhost")  # the fake's links name 127.0.0.1
    spec = source(kind="github", repo=REPO, api=api, items=["merged_pulls"], max_items=500)

    with pytest.raises(SourceReadError, match="another server"):
        read_source(spec, WEEK, context(github_token="ghp_secret"))

    assert len(github.requests) == 1


def test_a_first_slot_reads_only_the_pages_max_items_needs(github: FakeGithub) -> None:
    for number in range(1, 351):
        moment = SLOT - number * DAY
        github.add_pull(REPO, number=number, title=f"PR {number}", updated=moment, merged=moment)

    spec = source(kind="github", repo=REPO, api=github.url, items=["merged_pulls"], max_items=150)
    items = read_source(spec, Window(start=None, end=SLOT), context())

    assert [item.item_id for item in items[:2]] == ["pull:1", "pull:2"]
    assert len(items) == 150
    assert len(github.requests) == 2  # of 4 pages
