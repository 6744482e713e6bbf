"""People see what a draft is based on (docs/design.md §27): the review message's "Based
on N items" line, linked, escaped and within Block Kit's limits; on SQLite and PostgreSQL
from the stored snapshot to the rendered blocks."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from bot.block_kit import CONTEXT_LIMIT
from bot.blocks import review_message
from bot.cli import app
from bot.review_facts import basis_line, fact_lines
from core.api.services import Services
from core.drafting.basis import SourceAccess
from core.drafting.service import DraftingService
from core.drafting_policies import DraftOutcome
from core.models import DraftRow, RunRow, SourceSnapshotRow
from core.ports import BasisItem, DraftBasis
from core.review.facts import annotate
from core.review.queue import review_item
from core.setup.config import parse_config
from core.sources.items import ReadContext, SourceItem, SourceReadError, Window
from core.sources.specs import SourceSpec
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic

AT = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
FILE_SOURCE = '\nsources = [{ kind = "file", path = "notes/*.md", name = "notes" }]\n'
SOURCES = (
    '\nsources = [{ kind = "file", path = "notes/*.md", name = "notes" },'
    ' { kind = "file", path = "feed/*.md", name = "feed", required = false }]\n'
)
TITLES = [
    "Release v2.3",
    "Fix login on Safari <!here>",
    "Ping <@U0BOSS> & friends",
    "Docs *bold* _it_",
    "Fifth item",
]


def read(spec: SourceSpec, window: Window, context: ReadContext) -> list[SourceItem]:
    if spec.label == "feed":
        raise SourceReadError("feed", "HTTP 503", retryable=False)
    return [
        SourceItem("notes", f"n{i}", title, f"https://example.com/{i}?a=1&b=<2>", AT, "text")
        for i, title in enumerate(TITLES)
    ]


def test_the_review_message_says_what_the_draft_is_based_on_with_links(
    store: Store, tmp_path: Path
) -> None:
    config = parse_config(config_text() + SOURCES)
    recipe = config.recipe("weekly-update")
    service = DraftingService(store, InstantDrafter(), clock=FrozenClock(), worker="w")
    service.basis.access, service.basis.reader = SourceAccess(tmp_path), read
    slot = Services(config, store).resolve_slot(recipe, "2026-11-23T09:00")
    service.draft_slot(recipe, slot, manual=True)
    with store.read() as session:
        draft = session.exec(select(DraftRow)).one()
        run = session.get(RunRow, draft.run_id)
        assert run is not None
        item = review_item(draft, run)

    annotated = annotate(store, config, FrozenClock().now(), item)
    _, blocks = review_message(annotated, fact_lines(annotated))

    shown = json.dumps(blocks)
    [line] = [f for f in fact_lines(annotated) if "Based on" in f]
    assert line.startswith(
        ":page_facing_up: Based on 5 items: <https://example.com/0?a=1&amp;b=%3C2%3E|"
    )
    assert "Release v2.3>" in line and "Fix login on Safari &lt;!here&gt;" in line
    assert line.count("<https://") == 4 and " · … · " in line  # four named, all counted
    assert "left out (could not be read): feed" in line
    assert "<!here>" not in shown and "<@U0BOSS>" not in shown


def basis_drafted_at(store: Store, tmp_path: Path, now: datetime) -> str:
    """The "Based on" line of this morning's slot (Monday 09:00) drafted by hand at `now`."""
    config = parse_config(config_text() + SOURCES)
    recipe = config.recipe("weekly-update")
    service = DraftingService(store, InstantDrafter(), clock=FrozenClock(now), worker="w")
    service.basis.access, service.basis.reader = SourceAccess(tmp_path), read
    slot = Services(config, store).resolve_slot(recipe, "2026-11-30T09:00")
    assert service.draft_slot(recipe, slot, manual=True).outcome == DraftOutcome.DRAFTED
    with store.read() as session:
        draft = session.exec(select(DraftRow)).one()
        run = session.get(RunRow, draft.run_id)
        assert run is not None
        item = review_item(draft, run)
    [line] = [f for f in fact_lines(annotate(store, config, now, item)) if "Based on" in f]
    return line


def test_a_late_draft_says_the_entries_after_its_slot_are_left_out(
    store: Store, tmp_path: Path
) -> None:
    """Drafted by hand three hours after its slot: its window closed at the slot, so
    the morning's entries are not in it, and the message says why."""
    line = basis_drafted_at(store, tmp_path, datetime(2026, 11, 30, 12, 0, tzinfo=UTC))
    slot = int(datetime(2026, 11, 30, 9, 0, tzinfo=UTC).timestamp())
    assert line.endswith(
        f" · drafted late: entries after <!date^{slot}^{{date_short_pretty}} {{time}}|"
        "2026-11-30T09:00+00:00> are left out, they belong to the next slot"
    )


def test_a_draft_on_time_says_nothing_of_later_entries(store: Store, tmp_path: Path) -> None:
    line = basis_drafted_at(store, tmp_path, datetime(2026, 11, 30, 9, 1, tzinfo=UTC))
    assert "drafted late" not in line


def test_the_basis_line_stays_within_a_context_block() -> None:
    long = "x" * 5000
    basis = DraftBasis(
        items=tuple(BasisItem(long, "https://example.com/" + "y" * 300) for _ in range(50)),
        left_out=tuple("z" * 200 for _ in range(3)),
        closed_at=AT,
    )
    assert len(basis_line(basis)) <= CONTEXT_LIMIT


def test_an_empty_basis_says_the_sources_had_nothing_new() -> None:
    assert basis_line(DraftBasis(items=())).endswith(
        "Based on no items: the sources had nothing new"
    )


# --- `galley sources` and `galley show`, through the CLI ---------------------------------


@pytest.fixture
def env(tmp_path: Path, db_url: str, fake_anthropic: FakeAnthropic) -> dict[str, str]:
    config = tmp_path / "galley.toml"
    config.write_text(config_text() + FILE_SOURCE)
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text, at in (
        ("release.md", "# Release v2.3\nShipped on Friday.", AT),
        ("old.md", "# Old news", AT - timedelta(days=30)),
    ):
        (notes / name).write_text(text)
        os.utime(notes / name, (at.timestamp(), at.timestamp()))
    return {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": db_url,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
    }


def galley(env: dict[str, str], *args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, json.loads(result.stdout) if "--json" in args else result.stdout


def test_galley_sources_shows_what_a_run_would_read_and_drafts_nothing(
    env: dict[str, str], fake_anthropic: FakeAnthropic, db_url: str
) -> None:
    code, shown = galley(env, "sources", "weekly-update", "--slot", "2026-11-23T09:00", "--json")

    assert code == 0, shown
    assert shown["run"] == "weekly-update@2026-11-23T09:00"
    assert (shown["window_start"], shown["window_end"]) == (
        "2026-11-16T09:00:00+00:00",
        "2026-11-23T09:00:00+00:00",
    )
    assert [(i["source"], i["title"]) for i in shown["items"]] == [("notes", "Release v2.3")]
    assert fake_anthropic.requests == []
    store = Store(db_url)
    try:
        with store.read() as session:
            assert session.exec(select(SourceSnapshotRow)).all() == []
            assert session.exec(select(RunRow)).all() == []
    finally:
        store.dispose()


def test_galley_show_lists_the_snapshot_the_model_was_given(
    env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    code, drafted = galley(env, "draft", "weekly-update", "--slot", "2026-11-23T09:00", "--json")
    assert code == 0 and drafted["outcome"] == DraftOutcome.DRAFTED, drafted

    code, shown = galley(env, "show", "weekly-update@2026-11-23T09:00", "--json")

    assert code == 0
    assert [(i["title"], i["item_id"]) for i in shown["sources"]] == [
        ("Release v2.3", "notes/release.md")
    ]
    [request] = fake_anthropic.requests
    content = request.body["messages"][0]["content"]
    assert "<title>Release v2.3</title>" in content and "Old news" not in content


def test_galley_sources_exits_1_when_a_required_source_cannot_be_read(
    env: dict[str, str], tmp_path: Path
) -> None:
    unreachable = '\nsources = [{ kind = "url", url = "http://127.0.0.1:9/changelog" }]\n'
    Path(env["GALLEY_CONFIG"]).write_text(config_text() + unreachable)

    code, shown = galley(env, "sources", "weekly-update", "--slot", "2026-11-23T09:00", "--json")

    assert code == 1
    [failure] = shown["failures"]
    assert (failure["source"], failure["required"]) == ("127.0.0.1", True)
    assert shown["items"] == []
