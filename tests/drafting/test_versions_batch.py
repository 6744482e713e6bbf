"""A set of versions drafted through a Message Batch (docs/design.md §30): the entry asks
with the same structured request as a synchronous call, its answer is validated by the
same function, and a set missing a target is sent again, never stored.

The real `anthropic` SDK against the fake over real HTTP; both backends.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import col, select

from core.api.services import Services
from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting.attempts import Backoff
from core.drafting.batch_drafter import BatchDrafter
from core.drafting_policies import AttemptOutcome, DraftOutcome
from core.identity import batch_custom_id
from core.models import AttemptRow, DraftRow
from core.post_body import PostBody
from core.setup.config import parse_config
from core.slots.schedule import slot_at_wall
from core.states import DraftState
from core.store.engine import Store
from core.testing import FrozenClock
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.anthropic_batches import succeeded
from tests.fakes.bluesky import HANDLE, PASSWORD

BLUESKY = f"bluesky:{HANDLE}"
HOOK = "http://127.0.0.1:9/hook"  # never called: the draft is not published here
CONFIG = f"""
[slack]
review_channel = "C0REVIEW"

[defaults]
timezone = "UTC"
model = "claude-test"
variants = "per_target"

[[recipes]]
name = "weekly-update"
platform = "linkedin"
schedule = "0 9 * * mon"
system = "You write concise updates."
prompt = "Write the weekly update."
drafting = "batch"
publish = [{{ to = "bluesky", handle = "{HANDLE}" }}, {{ to = "webhook", url = "{HOOK}" }}]
"""
SLOT = datetime(2026, 11, 23, 9, 0)
KEY = "linkedin|weekly-update@2026-11-23T09:00|v1"
SET = {BLUESKY: ["Short, again."], "webhook": ["The long one, again."]}
WHOLE = {BLUESKY: ["Short."], "webhook": ["The long one."]}


def services(store: Store, fake: FakeAnthropic) -> tuple[Services, FrozenClock]:
    clock = FrozenClock(datetime(2026, 11, 23, 9, 0, tzinfo=UTC))
    fake.batches.now = lambda: clock.now().timestamp()
    made = Services(
        parse_config(CONFIG),
        store,
        drafter=AnthropicDrafter(api_key="test", base_url=fake.url),
        clock=clock,
        backoff=Backoff(base_seconds=0.01, cap_seconds=0.05),
        batch_client=BatchDrafter(api_key="test", base_url=fake.url),
    )
    return made, clock


def stored(store: Store) -> tuple[str | None, list[tuple[str | None, str | None]]]:
    with store.read() as session:
        draft = session.get(DraftRow, KEY)
        rows = session.exec(select(AttemptRow).order_by(col(AttemptRow.number))).all()
        return (None if draft is None else draft.text), [(a.mode, a.outcome) for a in rows]


@pytest.fixture(autouse=True)
def bluesky_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GALLEY_BLUESKY_PASSWORD", PASSWORD)


def test_a_batch_entry_asks_and_stores_the_set_as_a_synchronous_call_does(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    galley, clock = services(store, fake_anthropic)
    recipe = galley.config.recipe("weekly-update")
    whole = json.dumps({"versions": WHOLE})
    fake_anthropic.batches.script_entries({batch_custom_id(KEY): succeeded(whole)})
    assert galley.drafting.draft_slot(recipe, slot_at_wall(recipe, SLOT)).outcome == (
        DraftOutcome.BATCHED
    )
    batches = galley.batch_pass()
    assert batches is not None
    for _ in range(3):
        clock.advance(timedelta(seconds=30))
        batches.run_once()

    [create] = fake_anthropic.batches.creates
    params = create.body["requests"][0]["params"]
    sync_request = galley.drafting.stored_request(recipe, slot_at_wall(recipe, SLOT), 1)
    assert params["tool_choice"] == {"type": "tool", "name": "submit_post"}
    assert params["tools"][0]["input_schema"]["required"] == ["versions"]
    system = params["system"] if isinstance(params["system"], str) else params["system"][0]["text"]
    assert system == sync_request.system  # the same request, batch or not
    text, _ = stored(store)
    assert text == PostBody({k: tuple(v) for k, v in WHOLE.items()}).to_text()


def test_a_batch_answer_missing_a_target_is_sent_again_and_never_stored(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    galley, clock = services(store, fake_anthropic)
    recipe = galley.config.recipe("weekly-update")
    half = json.dumps({"versions": {BLUESKY: ["Short."]}})
    fake_anthropic.batches.script_entries({batch_custom_id(KEY): succeeded(half)})
    galley.drafting.draft_slot(recipe, slot_at_wall(recipe, SLOT))
    batches = galley.batch_pass()
    assert batches is not None
    while not stored(store)[1][0][1]:  # until the first batch has ended
        clock.advance(timedelta(seconds=30))
        batches.run_once()
    assert stored(store) == (None, [("batch", AttemptOutcome.MALFORMED_ANSWER), ("batch", None)])

    whole = json.dumps({"versions": SET})  # the entry's next answer, in the next batch
    fake_anthropic.batches.script_entries({batch_custom_id(KEY): succeeded(whole)})
    for _ in range(3):
        clock.advance(timedelta(seconds=30))
        batches.run_once()
    text, outcomes = stored(store)
    assert outcomes == [("batch", AttemptOutcome.MALFORMED_ANSWER), ("batch", AttemptOutcome.OK)]
    assert PostBody.parse(text or "").versions["webhook"] == tuple(SET["webhook"])
    with store.read() as session:
        draft = session.get(DraftRow, KEY)
        assert draft is not None and draft.state == DraftState.READY
