"""Reading a recipe's sources: 5 sources of 50 items each against the local fakes.

    .venv/bin/python -m bench.sources_read [--repeat 20]

The sources are an RSS 2.0 feed, an Atom feed, a GitHub repository (25 releases and 25
merged pull requests), a Slack channel (50 messages, 10 of them with a 3-reply thread)
and 50 files; a `url` page is timed beside them. Printed per source: the first read
(what a fresh process pays, imports included) and the median and worst of `--repeat`
later reads, then the 5 read one after another as a run does. Goal: the 5 read in
under 1 s once warm (a slot's reads are not what keeps a draft waiting).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.sources.items import ReadContext, Window
from core.sources.reading import read_source
from core.sources.slack_history import slack_ts
from core.sources.specs import SourceSpec
from tests.fakes.github import FakeGithub
from tests.fakes.slack_api import FakeSlack
from tests.fakes.web import ATOM_TYPE, HTML_TYPE, RSS_TYPE, FakeWeb
from tests.sources.feed_documents import Entry, atom, rss2
from tests.sources.specs import source

SLOT = datetime(2026, 3, 9, 9, 0, tzinfo=UTC)
WINDOW = Window.lasting(timedelta(days=7), SLOT)
ITEMS = 50
GOAL_SECONDS = 1.0
PARAGRAPH = "<p>Search is faster, the docs have examples, and the dashboard has a dark mode.</p>"


def entries() -> list[Entry]:
    return [
        Entry(
            f"post-{n}",
            f"Post {n}",
            f"/posts/{n}",
            SLOT - timedelta(hours=2 * n + 1),
            PARAGRAPH * 3,
        )
        for n in range(ITEMS)
    ]


def seed_github(github: FakeGithub) -> None:
    for n in range(ITEMS // 2):
        moment = SLOT - timedelta(hours=3 * n + 1)
        github.add_release(
            "acme/widget", tag=f"v1.{n}", created=moment, published=moment, body="## Changes\n- x"
        )
        github.add_pull(
            "acme/widget", number=n + 1, title=f"PR {n}", updated=moment, merged=moment, body="Why."
        )


def seed_slack(slack: FakeSlack) -> None:
    slack.add_user("U1", "Ana Lopez", "ana")
    slack.add_user("U2", "Bo Chen")
    for n in range(ITEMS):
        ts = slack_ts(SLOT - timedelta(hours=2 * n + 1))
        slack.add_message("C0SHIPPED", f"Shipped thing {n}, thanks <@U2>", user="U1", ts=ts)
        if n % 5 == 0:
            for r in range(3):
                reply_ts = slack_ts(SLOT - timedelta(hours=2 * n + 1) + timedelta(minutes=r + 1))
                slack.add_reply("C0SHIPPED", ts, f"reply {r}", user="U2", ts=reply_ts)


def seed_files(root: Path) -> None:
    for n in range(ITEMS):
        path = root / "notes" / f"{n:02d}.md"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"# Note {n}\n\n" + "Shipped a thing.\n" * 20)
        moment = (SLOT - timedelta(hours=2 * n + 1)).timestamp()
        os.utime(path, (moment, moment))


def timed(read: Callable[[], int], repeat: int) -> tuple[float, list[float], int]:
    started = time.perf_counter()
    count = read()
    first = time.perf_counter() - started
    later = []
    for _ in range(repeat):
        started = time.perf_counter()
        read()
        later.append(time.perf_counter() - started)
    return first, later, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with (
        FakeWeb() as web,
        FakeGithub() as github,
        FakeSlack() as slack,
        tempfile.TemporaryDirectory() as tmp,
    ):
        seed_github(github)
        seed_slack(slack)
        seed_files(Path(tmp))
        specs: dict[str, SourceSpec] = {
            "rss": source(
                kind="feed",
                url=web.publish("/rss.xml", rss2(entries()), RSS_TYPE),
                name="rss",
                max_items=ITEMS,
            ),
            "atom": source(
                kind="feed",
                url=web.publish("/atom.xml", atom(entries()), ATOM_TYPE),
                name="atom",
                max_items=ITEMS,
            ),
            "github": source(kind="github", repo="acme/widget", api=github.url, max_items=ITEMS),
            "slack": source(kind="slack", channel="C0SHIPPED", max_items=ITEMS),
            "files": source(kind="file", path="notes/*.md", max_items=ITEMS),
        }
        page = web.publish(
            "/changelog",
            f"<html><title>Changelog</title><main>{PARAGRAPH * 50}</main></html>",
            HTML_TYPE,
        )
        context = ReadContext(
            config_dir=Path(tmp),
            timeout=10.0,
            slack_token="xoxb-bench",
            slack_api=slack.url + "/api/",
        )

        def reader(spec: SourceSpec) -> Callable[[], int]:
            return lambda: len(read_source(spec, WINDOW, context))

        print(f"{'source':8} {'items':>5} {'first ms':>9} {'median ms':>10} {'worst ms':>9}")
        for name, spec in [*specs.items(), ("url", source(kind="url", url=page))]:
            first, later, count = timed(reader(spec), args.repeat)
            median, worst = statistics.median(later) * 1000, max(later) * 1000
            print(f"{name:8} {count:5d} {first * 1000:9.1f} {median:10.1f} {worst:9.1f}")
        _, runs, total = timed(lambda: sum(reader(spec)() for spec in specs.values()), args.repeat)
        median = statistics.median(runs)
        verdict = "PASS" if median < GOAL_SECONDS else "MISS"
        print(
            f"all 5 one after another: {total} items, median {median * 1000:.1f} ms "
            f"(goal < {GOAL_SECONDS * 1000:.0f} ms: {verdict}); load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
