"""`galley check --online` reads each source of each recipe once and prints one line
each: its item count, or its failure; a required source's failure exits 2, an optional
one's is shown and does not (docs/design.md §26). Against fakes over real HTTP."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from core.sources.items import Window
from core.sources.reading import check_source
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.fakes.web import HTML_TYPE, FakeWeb
from tests.sources.feed_documents import Entry, rss091
from tests.sources.specs import SLOT, WEEK, context, source


@dataclass
class Fakes:
    slack: FakeSlack
    web: FakeWeb
    anthropic: FakeAnthropic


@pytest.fixture
def fakes(fake_anthropic: FakeAnthropic) -> Iterator[Fakes]:
    with FakeSlack() as slack, FakeWeb() as web:
        yield Fakes(slack, web, fake_anthropic)


def check_online(tmp_path: Path, fakes: Fakes, sources: str) -> tuple[int, list[str]]:
    config = tmp_path / "galley.toml"
    config.write_text(config_text() + f"sources = [\n{sources}\n]\n")
    env = {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'g.db'}",
        "SLACK_BOT_TOKEN": "xoxb-test",
        "GALLEY_SLACK_API_URL": fakes.slack.url + "/api/",
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": fakes.anthropic.url,
    }
    assert CliRunner().invoke(app, ["db", "upgrade"], env=env).exit_code == 0
    result = CliRunner().invoke(app, ["check", "--online"], env=env)
    return result.exit_code, [
        line for line in result.output.splitlines() if line.startswith("source ")
    ]


def published(fakes: Fakes) -> tuple[str, str]:
    undated = [Entry(f"{n}", f"Post {n}", f"/posts/{n}", None, "<p>News.</p>") for n in range(3)]
    feed = fakes.web.publish("/feed.xml", rss091(undated), "text/xml")
    page = fakes.web.publish(
        "/changelog", "<html><title>Changes</title><p>2.0 is out.</p></html>", HTML_TYPE
    )
    return feed, page


def test_each_source_is_one_line_with_its_item_count(tmp_path: Path, fakes: Fakes) -> None:
    feed, page = published(fakes)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "week.md").write_text("# This week\nShipped.")  # dated now: in the window

    code, lines = check_online(
        tmp_path,
        fakes,
        f'{{ kind = "feed", url = "{feed}", name = "blog" }},\n'
        f'{{ kind = "url", url = "{page}", name = "changes" }},\n'
        '{ kind = "file", path = "notes/*.md" }',
    )

    assert code == 0, lines
    assert lines == [
        "source weekly-update/blog: ok: 3 items",
        "source weekly-update/changes: ok: 1 item",
        "source weekly-update/notes/*.md: ok: 1 item",
    ]
    assert [request.path for request in fakes.web.requests] == ["/feed.xml", "/changelog"]


def test_a_required_source_that_fails_exits_2(tmp_path: Path, fakes: Fakes) -> None:
    feed, _ = published(fakes)

    code, lines = check_online(
        tmp_path,
        fakes,
        f'{{ kind = "feed", url = "{feed}", name = "blog" }},\n'
        f'{{ kind = "feed", url = "{fakes.web.url}/gone.xml", name = "old-blog" }}',
    )

    assert code == 2
    assert lines == [
        "source weekly-update/blog: ok: 3 items",
        "source weekly-update/old-blog: FAILED: HTTP 404 Not Found from "
        f"127.0.0.1:{fakes.web.port}/gone.xml: Not Found",
    ]


def test_an_optional_source_that_fails_is_shown_and_passes(tmp_path: Path, fakes: Fakes) -> None:
    gone = f"{fakes.web.url}/gone.xml"

    code, lines = check_online(
        tmp_path, fakes, f'{{ kind = "feed", url = "{gone}", name = "old-blog", required = false }}'
    )

    assert code == 0, lines
    assert lines[0].startswith(
        "source weekly-update/old-blog: FAILED (optional: left out of drafts): HTTP 404"
    )


def test_a_check_counts_only_the_window(tmp_path: Path) -> None:
    for name, age in (("new.md", timedelta(days=1)), ("old.md", timedelta(days=8))):
        path = tmp_path / name
        path.write_text("# Note")
        moment = (SLOT - age).timestamp()
        os.utime(path, (moment, moment))

    week = check_source("weekly", source(kind="file", path="*.md"), WEEK, context(tmp_path))
    ever = check_source(
        "weekly", source(kind="file", path="*.md"), Window(None, SLOT), context(tmp_path)
    )

    assert (str(week), str(ever)) == (
        "source weekly/*.md: ok: 1 item",
        "source weekly/*.md: ok: 2 items",
    )
