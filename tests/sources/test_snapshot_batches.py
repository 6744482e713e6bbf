"""A batch recipe's run stores its snapshot when its slot is claimed, before its entry is
sent, and the batch's request reads it (docs/design.md §27); against the fake Anthropic
API over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.api.services import Services
from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting.attempts import Backoff
from core.drafting.basis import SourceAccess
from core.drafting.batch_drafter import BatchDrafter
from core.drafting_policies import DraftOutcome
from core.setup.config import parse_config
from core.slots.schedule import slot_at_wall
from core.store.engine import Store
from core.testing import FrozenClock
from tests.fakes.anthropic_api import FakeAnthropic

CONFIG = """
[slack]
review_channel = "C0REVIEW"

[defaults]
timezone = "UTC"
model = "claude-test"
drafting = "batch"
batch_gather = "30s"

[[recipes]]
name = "weekly-update"
platform = "linkedin"
schedule = "0 9 * * mon"
prompt = "Write the weekly update."
sources = [{ kind = "file", path = "notes/*.md", name = "notes" }]
"""
MONDAY_9 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def write_note(folder: Path, text: str) -> None:
    notes = folder / "notes"
    notes.mkdir(exist_ok=True)
    path = notes / "release.md"
    path.write_text(text)
    at = (MONDAY_9 - timedelta(days=2)).timestamp()
    os.utime(path, (at, at))


def test_a_batch_entry_is_sent_with_the_snapshot_stored_when_its_slot_was_claimed(
    store: Store, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    clock = FrozenClock(MONDAY_9)
    fake_anthropic.batches.now = lambda: clock.now().timestamp()
    config = parse_config(CONFIG)
    services = Services(
        config,
        store,
        drafter=AnthropicDrafter(api_key="test", base_url=fake_anthropic.url),
        clock=clock,
        backoff=Backoff(base_seconds=0.01, cap_seconds=0.05),
        batch_client=BatchDrafter(api_key="test", base_url=fake_anthropic.url),
    )
    services.drafting.basis.access = SourceAccess(config_dir=tmp_path)
    recipe = config.recipe("weekly-update")
    write_note(tmp_path, "# Release v2.3\nThe login works on Safari again.")

    fired = services.drafting.draft_slot(
        recipe, slot_at_wall(recipe, MONDAY_9.replace(tzinfo=None))
    )
    write_note(tmp_path, "# Release v9.9\nEverything was rewritten meanwhile.")
    batches = services.batch_pass()
    assert batches is not None and fired.outcome == DraftOutcome.BATCHED
    clock.advance(timedelta(seconds=30))
    batches.run_once()

    [create] = fake_anthropic.batches.creates
    [entry] = create.body["requests"]
    content = entry["params"]["messages"][0]["content"]
    assert "Release v2.3" in content and "v9.9" not in content
