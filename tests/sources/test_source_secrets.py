"""A source's credential comes from the environment and goes as one header to the
configured server; a configured URL holding one is refused in one line; and no link an
item brings carries one into what Galley stores, shows or gives the model (docs/design.md
§26)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from bot.cli import app
from core.egress.client import Fetched
from core.errors import ConfigError
from core.setup.config import parse_config
from core.setup.serving import unserved
from core.sources.feeds import feed_items
from core.sources.items import ItemImage, SourceItem, SourceReadError
from core.sources.reading import read_source
from core.sources.url_credentials import credential_in_url, without_credentials
from tests.conftest import config_text
from tests.fakes.web import RSS_TYPE, FakeWeb, status
from tests.harness.slow_marks import starts_a_server
from tests.sources.feed_documents import Entry, rss2
from tests.sources.specs import SLOT, WEEK, context, source

PASSWORD, TOKEN = "hunter2-pw", "tok-5ecret"
SECRETS = (PASSWORD, TOKEN)
RELEASE = Entry("post-41", "Widget 2.0", "/posts/2", SLOT - timedelta(days=1), "<p>Out.</p>")


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        (f"https://reader:{PASSWORD}@blog.example.com/p/1", "https://blog.example.com/p/1"),
        (f"https://{TOKEN}@blog.example.com/p/1", "https://blog.example.com/p/1"),
        (f"https://example.com/p?page=2&token={TOKEN}", "https://example.com/p?page=2"),
        (f"https://example.com/p?api_key={TOKEN}&a=b+c", "https://example.com/p?a=b+c"),
        (f"https://example.com/p?apikey={TOKEN}", "https://example.com/p"),
        (
            f"https://gitlab.example.com/f.atom?feed_token={TOKEN}",
            "https://gitlab.example.com/f.atom",
        ),
        (
            f"https://s3.example.com/i.jpg?X-Amz-Signature={TOKEN}&v=1",
            "https://s3.example.com/i.jpg?v=1",
        ),
        (f"https://example.com/p?sig={TOKEN}&password={PASSWORD}", "https://example.com/p"),
        (f"https://example.com/cb#access_token={TOKEN}&state=1", "https://example.com/cb#state=1"),
    ],
)
def test_userinfo_and_credential_like_parameters_are_found_and_stripped(
    url: str, kept: str
) -> None:
    assert credential_in_url(url) is not None
    assert not any(secret in (credential_in_url(url) or "") for secret in SECRETS)
    assert without_credentials(url) == kept


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/p?page=2&sort_key=date",
        "https://example.com/docs#get-a-token",
        "https://example.com/search?q=token",
        "https://example.com/a%20b?x=1",
    ],
)
def test_a_url_holding_no_credential_is_kept_as_written(url: str) -> None:
    assert credential_in_url(url) is None
    assert without_credentials(url) == url


def test_an_item_never_keeps_a_credential_its_links_held() -> None:
    link = f"https://reader:{PASSWORD}@blog.example.com/p/1?token={TOKEN}&page=2"
    item = SourceItem(
        "blog",
        link,
        link,
        link,
        SLOT,
        "text",
        ItemImage(f"https://cdn.example.com/a.jpg?sig={TOKEN}"),
    )
    assert (item.item_id, item.title, item.link) == ("https://blog.example.com/p/1?page=2",) * 3
    assert item.image is not None and item.image.url == "https://cdn.example.com/a.jpg"


def test_entry_links_resolved_against_a_feed_url_with_credentials_do_not_carry_them() -> None:
    feed_url = f"https://reader:{PASSWORD}@blog.example.com/feed.xml?token={TOKEN}"
    answer = Fetched(feed_url, 200, "OK", httpx.Headers(), rss2([RELEASE]).encode())

    [item] = feed_items("blog", answer)

    assert item.link == "https://blog.example.com/posts/2"
    assert not any(secret in repr(item) for secret in SECRETS)


# --- refused in the config, in one line ----------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "where", "found"),
    [
        (
            f'{{ kind = "feed", url = "https://reader:{PASSWORD}@blog.example.com/feed.xml" }}',
            "sources[1]: url of source 'blog.example.com'",
            "a user:password@ (userinfo): name the variable holding it in secret_env instead",
        ),
        (
            f'{{ kind = "url", url = "https://example.com/changes?access_token={TOKEN}" }}',
            "sources[1]: url of source 'example.com'",
            "a credential-like query parameter (access_token)",
        ),
        (
            f'{{ kind = "github", repo = "a/b", api = "https://{TOKEN}@ghe.example.com/api" }}',
            "sources[1]: api of source 'a/b'",
            "set GALLEY_GITHUB_TOKEN",
        ),
        (
            f'{{ kind = "slack", channel = "C0N", api = "https://sl.example.com?token={TOKEN}" }}',
            "sources[1]: api of source '#C0N'",
            "a credential-like query parameter (token)",
        ),
    ],
    ids=["feed userinfo", "url token", "github api", "slack api"],
)
def test_a_configured_url_holding_a_credential_is_refused_in_one_line_without_it(
    entry: str, where: str, found: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(config_text() + f"\nsources = [{entry}]\n")
    [line] = refused.value.problems
    assert line.startswith(f"recipe 'weekly-update': {where} holds ")
    assert found in line
    assert not any(secret in line for secret in SECRETS)


def test_secret_header_without_secret_env_is_refused() -> None:
    entry = '{ kind = "feed", url = "https://blog.example.com/feed.xml", secret_header = "X-Key" }'
    with pytest.raises(ConfigError, match="secret_header needs secret_env"):
        parse_config(config_text() + f"\nsources = [{entry}]\n")


SECRET_FEED = (
    '\nsources = [{ kind = "feed", url = "https://blog.example.com/feed.xml", name = "blog",'
    ' secret_env = "BLOG_FEED_KEY" }]\n'
)


def test_an_unset_secret_env_is_one_line_naming_the_source_and_the_variable() -> None:
    config = parse_config(config_text() + SECRET_FEED)
    assert unserved(config, {}) == [
        "recipe 'weekly-update': sources[1] (blog): BLOG_FEED_KEY is not set: its secret_env "
        "names it as the source's credential"
    ]
    assert unserved(config, {"BLOG_FEED_KEY": TOKEN}) == []


@pytest.mark.parametrize(
    ("sources", "line"),
    [
        (
            SECRET_FEED,
            "recipe 'weekly-update': sources[1] (blog): BLOG_FEED_KEY is not set: its "
            "secret_env names it as the source's credential",
        ),
        (
            SECRET_FEED.replace("https://", f"https://reader:{PASSWORD}@"),
            "recipe 'weekly-update': sources[1]: url of source 'blog' holds a user:password@ "
            "(userinfo): name the variable holding it in secret_env instead",
        ),
    ],
    ids=["unset secret_env", "password in the url"],
)
def test_galley_check_refuses_a_source_credential_out_of_place_in_one_line(
    tmp_path: Path, sources: str, line: str
) -> None:
    config = tmp_path / "galley.toml"
    config.write_text(config_text() + sources)
    env = {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'galley.db'}",
        "ANTHROPIC_API_KEY": "test-key",
        "BLOG_FEED_KEY": "",
    }
    result = CliRunner().invoke(app, ["check"], env=env)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [line]


# --- sent as a header, to the configured server only ---------------------------------------


@pytest.fixture
@starts_a_server
def webs() -> Iterator[tuple[FakeWeb, FakeWeb]]:
    """The feed's server, and another (another origin) a redirect may name."""
    with FakeWeb() as blog, FakeWeb() as elsewhere:
        yield blog, elsewhere


@pytest.mark.parametrize(
    ("header", "sent"),
    [(None, ("authorization", f"Bearer {TOKEN}")), ("X-Api-Key", ("x-api-key", TOKEN))],
    ids=["bearer by default", "a header of its own"],
)
def test_the_secret_goes_as_a_header_to_the_configured_origin_and_never_past_a_redirect(
    webs: tuple[FakeWeb, FakeWeb],
    monkeypatch: pytest.MonkeyPatch,
    header: str | None,
    sent: tuple[str, str],
) -> None:
    blog, elsewhere = webs
    monkeypatch.setenv("BLOG_FEED_KEY", TOKEN)
    elsewhere.publish("/feed.xml", rss2([RELEASE]), RSS_TYPE)
    blog.script("/feed.xml", status(302, headers={"Location": f"{elsewhere.url}/feed.xml"}))
    keys = {"secret_header": header} if header else {}
    spec = source(kind="feed", url=f"{blog.url}/feed.xml", secret_env="BLOG_FEED_KEY", **keys)

    [item] = read_source(spec, WEEK, context())

    [asked] = blog.requests
    assert asked.headers.get(sent[0]) == sent[1]
    [redirected] = elsewhere.requests
    assert not any(TOKEN in value for value in redirected.headers.values())
    assert item.link == f"{elsewhere.url}/posts/2"


def test_a_source_whose_variable_is_unset_when_read_fails_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BLOG_FEED_KEY", raising=False)
    spec = source(kind="feed", url="https://blog.example.com/feed.xml", secret_env="BLOG_FEED_KEY")
    with pytest.raises(SourceReadError, match="BLOG_FEED_KEY is not set") as failed:
        read_source(spec, WEEK, context())
    assert not failed.value.retryable
