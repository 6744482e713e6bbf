"""The snapshot's guards (docs/design.md §27, §29), each forced where it acts: an edited
undated item moves to one run only, however many take their snapshot at once (the
compare-and-set on `content_hash`); an item run's holder whose claim was taken over
while it read its item stores nothing (the fence). Final state only: stored rows and
the model's prompts."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from core.drafting.claims import Claim, claim_slot
from core.errors import LostClaim
from core.failpoints import Failpoint, hook
from core.models import SeenSourceItemRow, SourceSnapshotRow
from core.slots.schedule import slot_of_run
from core.sources.items import SourceItem
from core.sources.specs import SourceSpec
from core.store.engine import Store
from core.testing import FrozenClock
from tests.harness.races import skip_on_sqlite
from tests.scheduling.test_items import Crash, FeedStub, feed_of, items_recipe, make_poller, runs
from tests.sources.test_snapshot import FILE_SOURCE, SLOT_WALL, drafting, reading, services

EDITED_WALLS = ("2026-11-16T09:00", SLOT_WALL)


def test_an_edited_undated_item_is_new_to_one_of_two_runs_taking_their_snapshot_at_once(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    """Both runs read the sighting as the first run left it; the second to move it finds it
    moved (READ COMMITTED re-reads the row at its UPDATE) and leaves the item out."""
    skip_on_sqlite(db_url)
    galley, recipe = services(store, tmp_path, FILE_SOURCE + 'on_empty = "draft"\n')
    page = {"text": "Version one of the page."}

    def read(spec: SourceSpec) -> list[SourceItem]:
        return [
            SourceItem("notes", "https://e.com/changelog", "Changelog", None, None, page["text"])
        ]

    first, _ = drafting(store, tmp_path, "w0", FrozenClock(), reading(read))
    first.draft_slot(recipe, galley.resolve_slot(recipe, "2026-11-09T09:00"), manual=True)
    page["text"] = "Version two: the page was edited."
    later, later_model = drafting(store, tmp_path, "w1", FrozenClock(), reading(read))
    other, other_model = drafting(store, tmp_path, "w2", FrozenClock(), reading(read))
    inside = {"other": False}

    def the_other_run_moves_it_first() -> None:
        if inside["other"]:
            return  # the other run's own read of the sighting
        inside["other"] = True
        other.draft_slot(recipe, galley.resolve_slot(recipe, EDITED_WALLS[1]), manual=True)

    with hook(Failpoint.SEEN_ITEM_READ, the_other_run_moves_it_first):
        later.draft_slot(recipe, galley.resolve_slot(recipe, EDITED_WALLS[0]), manual=True)

    prompts = [*later_model.requests, *other_model.requests]
    assert len(prompts) == 2
    assert sum("Changelog" in request.prompt for request in prompts) == 1
    with store.read() as session:
        [seen] = session.exec(select(SeenSourceItemRow)).all()
    assert seen.first_run_id == f"weekly-update@{EDITED_WALLS[1]}"  # the run that showed it
    assert "Changelog" in other_model.requests[0].prompt


def test_an_item_runs_holder_taken_over_before_it_stores_the_item_stores_nothing(
    store: Store,
) -> None:
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    recipe = items_recipe()
    p.poll(recipe)
    feed.entries = feed_of(1, 2)
    p.clock.advance(timedelta(minutes=5))

    def crash() -> None:
        raise Crash

    with hook(Failpoint.AFTER_POLL_COMMIT, crash), pytest.raises(Crash):
        p.poll(recipe)  # item 2's run recorded, not claimed
    [waiting] = [run for run in runs(store) if run.state == "pending"]
    slot = slot_of_run(recipe, waiting.id, waiting.slot_at)
    assert slot is not None
    clock = p.clock

    def claimed(worker: str) -> Claim:
        got = claim_slot(
            store, recipe, slot, worker=worker, actor=worker, manual=False, clock=clock
        )
        assert isinstance(got, Claim), got
        return got

    loser = claimed("worker-a")
    clock.advance(recipe.takeover_after + timedelta(seconds=1))
    winner = claimed("worker-b")
    basis = p.poller.drafting.basis

    with pytest.raises(LostClaim):
        basis.take(recipe, slot, loser)

    with store.read() as session:
        assert session.exec(select(SourceSnapshotRow)).all() == []
    basis.take(recipe, slot, winner)
    with store.read() as session:
        [taken] = session.exec(select(SourceSnapshotRow)).all()
    assert taken.taken_by == winner.owner
