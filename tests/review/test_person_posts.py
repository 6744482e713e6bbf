"""A person's own post and a plan imported (docs/design.md §37): a run `recipe@post:<id>`
whose draft is the person's text, reviewed like a model's draft and published once at its
time, with no model call; a plan checked row by row before anything is added, and the same
plan imported twice adding nothing.

In process over real HTTP to the fake webhook, the fake Slack and the fake Anthropic API
(tests/harness/worlds.py), with an injected clock. Assertions are on rows, on what the
fakes received and on return values. Both backends.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import col, select

from core.errors import GalleyError
from core.identity import post_run_id
from core.models import DraftRow, RunRow
from core.policies import PublishOutcome
from core.post_body import PostBody
from core.publishing.missed_slots import expire_missed_slots
from core.review.queue import load_item
from core.scheduling.catch_up import latest_recorded_slots
from core.scheduling.dispatch import SlotDispatcher
from core.slots.publish_time import with_publication
from core.states import DraftState, RunState
from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness.worlds import RECIPE, MakeWorld, World
from tests.images.pictures import photo

BLUESKY = "bluesky:acme.bsky.social"


def post_runs(world: World) -> list[RunRow]:
    with world.store.read() as session:
        found = session.exec(
            select(RunRow).where(col(RunRow.id).contains("@post:")).order_by(col(RunRow.id))
        ).all()
        return list(found)


def count_drafts(world: World) -> int:
    with world.store.read() as session:
        return int(session.execute(sa.select(sa.func.count()).select_from(DraftRow)).scalar_one())


def test_a_persons_post_is_reviewed_and_published_once_with_no_model_call(
    worlds: MakeWorld, db_url: str, fake_anthropic: FakeAnthropic
) -> None:
    w = worlds(db_url)
    written = w.galley.post(RECIPE, "We launch on Monday.", actor="U0ADMIN")
    [run_id] = written.added
    assert run_id.startswith(f"{RECIPE}@post:h-")
    [run] = post_runs(w)
    assert (run.state, run.slot_wall) == (RunState.AWAITING_REVIEW, "asap")
    draft = w.draft_row(run.draft_key or "")
    assert (draft.state, draft.text, draft.revision) == (
        DraftState.READY,
        "We launch on Monday.",
        1,
    )

    assert w.approve(draft.key).accepted
    first = w.service("w1").publish_run(run_id)
    again = w.service("w2").publish_run(run_id)
    assert first.outcome == PublishOutcome.PUBLISHED
    assert again.outcome != PublishOutcome.PUBLISHED
    assert [p.body["text"] for p in w.hook.posts] == ["We launch on Monday."]
    assert w.run_row(run_id).state == RunState.SUCCEEDED
    assert fake_anthropic.requests == []  # no model call, ever

    decisions = [(d.decision, d.who) for d in w.galley.decisions(recipe=RECIPE)]
    assert decisions == [("approval", "U0EDITOR"), ("post", "U0ADMIN")]


def test_the_same_post_written_twice_is_one_run(worlds: MakeWorld, db_url: str) -> None:
    w = worlds(db_url)
    at = (w.clock.now() + timedelta(days=3)).isoformat()
    first = w.galley.post(RECIPE, "Doors open at nine.", at, actor="U0ADMIN")
    second = w.galley.post(RECIPE, "Doors open at nine.", at, actor="U0ADMIN")
    named = w.galley.post(RECIPE, "Doors open at nine.", at, post_id="doors", actor="U0ADMIN")
    assert second.added == () and second.already == first.added
    assert named.added == (post_run_id(RECIPE, "doors"),)
    assert len(post_runs(w)) == 2


def test_a_planned_post_goes_out_at_its_time_not_at_its_approval(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    at = w.clock.now() + timedelta(days=2)
    [run_id] = w.galley.post(RECIPE, "Sale starts now.", at.isoformat(), actor="U0ADMIN").added
    run = w.run_row(run_id)
    assert run.slot_at == at
    assert w.approve(run.draft_key or "").accepted
    assert w.run_row(run_id).publish_at == at
    item = load_item(w.store, run.draft_key or "")
    assert item is not None  # its message says when it goes out, as a slot drafted ahead's
    assert with_publication(w.config.recipes, item).publishes == "Wed 2 Dec 12:00 (Europe/London)"
    early = w.service("w1").publish_run(run_id)
    assert early.outcome != PublishOutcome.PUBLISHED and w.hook.posts == []
    w.clock.advance(timedelta(days=2, seconds=1))
    assert w.service("w1").publish_run(run_id).outcome == PublishOutcome.PUBLISHED
    assert len(w.hook.posts) == 1


def test_a_post_over_a_targets_limit_or_in_the_past_is_refused(
    worlds: MakeWorld, db_url: str
) -> None:
    bluesky = (
        'publish = { to = "bluesky", handle = "acme.bsky.social", service = "http://127.0.0.1:9" }'
    )
    w = worlds(db_url, publish=bluesky)
    with pytest.raises(GalleyError, match="Too long for Bluesky: 301/300"):
        w.galley.post(RECIPE, "x" * 301, actor="U0ADMIN")
    past = (w.clock.now() - timedelta(hours=1)).isoformat()
    with pytest.raises(GalleyError, match="has passed"):
        w.galley.post(RECIPE, "Fine text.", past, actor="U0ADMIN")
    with pytest.raises(GalleyError, match="not a target"):
        w.galley.post(RECIPE, "Fine.", targets={"mastodon:x": "y"}, actor="U0ADMIN")
    assert post_runs(w) == []
    w.galley.post(RECIPE, "Short.", targets={BLUESKY: "Short for Bluesky."}, actor="U0ADMIN")
    [run] = post_runs(w)
    assert BLUESKY in (w.draft_row(run.draft_key or "").text or "")


def write_plan(folder: Path, rows: list[str]) -> Path:
    plan = folder / "plan.csv"
    plan.write_text("publish_at,recipe,text,id,image,alt\n" + "\n".join(rows) + "\n")
    return plan


def test_a_plan_imported_twice_adds_nothing_the_second_time(
    worlds: MakeWorld, db_url: str, tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    w = worlds(db_url)
    (tmp_path / "team.jpg").write_bytes(photo(800, 600))
    plan = write_plan(
        tmp_path,
        [
            f"2026-12-01T09:00,{RECIPE},Monday's news,,,",
            f'2026-12-02T09:00,{RECIPE},"Tuesday, with a comma",tue,,',
            f"2026-12-03T09:00,{RECIPE},Our team,,team.jpg,The team on stage",
        ],
    )
    first = w.galley.import_plan(plan, actor="U0ADMIN")
    second = w.galley.import_plan(plan, actor="U0ADMIN")
    assert (len(first.written.added), len(first.written.already)) == (3, 0)
    assert (second.written.added, len(second.written.already)) == ((), 3)
    assert count_drafts(w) == 3
    runs = post_runs(w)
    assert {r.state for r in runs} == {RunState.AWAITING_REVIEW}
    assert post_run_id(RECIPE, "tue") in {r.id for r in runs}
    assert fake_anthropic.requests == []


def test_a_bad_row_refuses_the_whole_plan_with_its_line_number(
    worlds: MakeWorld, db_url: str, tmp_path: Path
) -> None:
    w = worlds(db_url)
    (tmp_path / "notes.jpg").write_bytes(b"%PDF-1.7 not an image")
    plan = write_plan(
        tmp_path,
        [
            f"2026-12-01T09:00,{RECIPE},Fine,,,",  # line 2
            "2026-12-01T09:00,no-such-recipe,Text,,,",  # line 3
            f"next tuesday,{RECIPE},Text,,,",  # line 4
            f"2026-12-05T09:00,{RECIPE},Pic,,missing.png,",  # line 5
            f"2026-12-05T09:00,{RECIPE},Pic,,notes.jpg,",  # line 6
            f"2026-12-06T09:00,{RECIPE},One,same,,",  # line 7
            f"2026-12-07T09:00,{RECIPE},Two,same,,",  # line 8
        ],
    )
    refused = w.galley.import_plan(plan, actor="U0ADMIN")
    assert refused.refused
    assert [row.line for row in refused.bad] == [3, 4, 5, 6, 8]
    assert "unknown recipe" in refused.bad[0].reason
    assert "not an ISO time" in refused.bad[1].reason
    assert "missing" in refused.bad[2].reason
    assert "line 7" in refused.bad[4].reason
    assert post_runs(w) == [] and count_drafts(w) == 0

    skipped = w.galley.import_plan(plan, skip_bad=True, actor="U0ADMIN")
    assert not skipped.refused and len(skipped.written.added) == 2
    assert len(post_runs(w)) == 2


def test_a_post_planned_weeks_ahead_hides_no_slot_of_the_schedule(
    worlds: MakeWorld, db_url: str, fake_anthropic: FakeAnthropic
) -> None:
    """The dispatcher and catch-up read a recipe's latest recorded slot: a post at its own
    time, even weeks ahead, is none, or every slot before it would go undrafted."""
    w = worlds(db_url)
    w.galley.post(RECIPE, "Season's greetings.", "2026-12-20T09:00", actor="U0ADMIN")
    with w.store.read() as session:
        assert RECIPE not in latest_recorded_slots(session)
    fire_at = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)  # the next Monday slot
    w.clock.current = fire_at
    dispatcher = SlotDispatcher(w.store, w.core.drafting, w.clock, recipes=w.config.recipes)
    [drafted] = dispatcher.fire(w.recipe, fire_at)
    assert (drafted.run, drafted.outcome) == (f"{RECIPE}@2026-12-07T09:00", "drafted")
    assert len(fake_anthropic.requests) == 1  # the slot's, never the post's


def test_a_bump_leaves_a_persons_post_waiting_and_approvable(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    [run_id] = w.galley.post(RECIPE, "Written by hand.", actor="U0ADMIN").added
    key = w.run_row(run_id).draft_key or ""
    w.galley.bump_recipe(RECIPE, actor="U0ADMIN", reason="new tone")
    assert w.draft_row(key).state == DraftState.READY
    assert w.run_row(run_id).state == RunState.AWAITING_REVIEW
    assert w.approve(key).accepted


def test_a_post_without_a_time_is_never_missed_one_with_a_time_is_past_publish_late(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)  # no draft_ahead: the recipe's own slots are never missed
    [asap] = w.galley.post(RECIPE, "Whenever approved.", actor="U0ADMIN").added
    at = (w.clock.now() + timedelta(hours=1)).isoformat()
    [timed] = w.galley.post(RECIPE, "At one o'clock.", at, actor="U0ADMIN").added
    w.clock.advance(timedelta(hours=2, minutes=1))  # past its time plus publish_late (1h)
    missed = expire_missed_slots(w.store, w.config, w.clock)
    assert [m.run_id for m in missed] == [timed]
    assert w.run_row(timed).state == RunState.EXPIRED
    assert w.run_row(asap).state == RunState.AWAITING_REVIEW


def test_a_plan_s_image_is_kept_with_its_alt_text(
    worlds: MakeWorld, db_url: str, tmp_path: Path
) -> None:
    w = worlds(db_url)
    (tmp_path / "team.jpg").write_bytes(photo(800, 600))
    (tmp_path / "inside").mkdir()
    plan = write_plan(
        tmp_path / "inside",
        [
            f"2026-12-03T09:00,{RECIPE},Our team,,../team.jpg,The team on stage",
        ],
    )
    refused = w.galley.import_plan(plan, actor="U0ADMIN")
    assert [row.line for row in refused.bad] == [2] and "not beside the plan" in refused.bad[
        0
    ].reason
    plan = write_plan(tmp_path, [f"2026-12-03T09:00,{RECIPE},Our team,,team.jpg,The team on stage"])
    [run_id] = w.galley.import_plan(plan, actor="U0ADMIN").written.added
    body = PostBody.parse(w.draft_row(w.run_row(run_id).draft_key or "").text or "")
    [image] = body.images
    assert (image.name, image.alt) == ("team.jpg", "The team on stage")
    assert w.core.images.get(image.sha256) is not None
