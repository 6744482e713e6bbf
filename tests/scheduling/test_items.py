"""Items: one run per new item (docs/design.md §29), on SQLite and PostgreSQL: a first poll
drafts nothing (or the newest `backfill`), a feed that reorders, re-serves, re-issues under a
new id or edits its entries makes one run, one draft per item; backpressure makes items wait
oldest first until `item_ttl`; two pollers at once and a crash between a poll and its claims
leave one run and one draft per item. Final state only: rows and the model's calls."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import col, select

from bot.digest_text import digest_text
from core.drafting.basis import SourceAccess
from core.drafting.service import DraftingService
from core.drafting_policies import DraftOutcome
from core.egress.way_out import Egress
from core.failpoints import Failpoint, hook
from core.identity import item_run_id, item_token
from core.models import DraftRow, PolledItemRow, RunRow, SnapshotItemRow
from core.operations.digest import build_digest
from core.policies import PendingReason, SkipReason, Verdict
from core.ports import Fit, PostQuery, Publication
from core.publishing.service import PublishingService
from core.review.queue import decide
from core.scheduling.dispatch import SlotDispatcher
from core.scheduling.items import ItemPoller
from core.setup.config import Config, Recipe, parse_config
from core.slots.schedule import Slot, latest_slot_at_or_before
from core.sources.items import ReadContext, SourceItem, Window
from core.sources.specs import SourceSpec
from core.states import DraftState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text
from tests.sources.specs import LOCAL_FAKES

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ITEMS = (
    '\ntrigger = "items"\n'
    'source = { kind = "feed", url = "https://blog.example.com/feed.xml", name = "blog" }\n'
)


class Crash(Exception):
    """A process ending at a failpoint, in-process."""


@dataclass
class FeedStub:
    """A feed as publishers serve it: `entries` newest first; a test reorders, re-serves,
    re-issues and edits them between polls. Counts its reads."""

    entries: list[SourceItem] = field(default_factory=list)
    reads: int = 0
    gate: threading.Barrier | None = None  # pollers reading at once meet here

    def read(self, spec: SourceSpec, window: Window, context: ReadContext) -> list[SourceItem]:
        self.reads += 1
        if self.gate is not None:
            self.gate.wait(timeout=10)
        return list(self.entries)


def entry(n: int, *, guid: str | None = None, title: str | None = None) -> SourceItem:
    return SourceItem(
        source="blog",
        item_id=guid or f"https://blog.example.com/?p={n}",
        title=title or f"Post {n}",
        link=f"https://blog.example.com/post-{n}",
        published_at=T0 - timedelta(hours=100 - n),
        text=f"What happened in post {n}.",
    )


def feed_of(*numbers: int) -> list[SourceItem]:
    return [entry(n) for n in sorted(numbers, reverse=True)]


def items_config(pending_limit: int = 3, **keys: str) -> Config:
    """The test config with its recipe as an items recipe polling every 5 minutes."""
    text = config_text(pending_limit=pending_limit).replace("0 9 * * mon", "*/5 * * * *")
    extra = "".join(f"{key} = {value}\n" for key, value in keys.items())
    return parse_config(text + ITEMS + extra)


def items_recipe(pending_limit: int = 3, **keys: str) -> Recipe:
    return items_config(pending_limit, **keys).recipe("weekly-update")


@dataclass
class Poller:
    poller: ItemPoller
    drafter: InstantDrafter
    clock: FrozenClock

    def poll(self, recipe: Recipe) -> None:
        slot = latest_slot_at_or_before(recipe, self.clock.now())
        assert slot is not None
        self.poller.poll(recipe, slot)


def make_poller(
    store: Store,
    feed: FeedStub,
    *,
    worker: str = "w1",
    clock: FrozenClock | None = None,
    told: Callable[[str], None] | None = None,
) -> Poller:
    clock, drafter = clock or FrozenClock(T0), InstantDrafter()
    drafting = DraftingService(store, drafter, clock=clock, worker=worker)
    drafting.basis.access = SourceAccess(Path.cwd(), egress=Egress(LOCAL_FAKES))
    poller = ItemPoller(store, drafting, clock, told=told)
    poller.reader = feed.read
    return Poller(poller, drafter, clock)


def runs(store: Store) -> list[RunRow]:
    with store.read() as session:
        return list(session.exec(select(RunRow).order_by(col(RunRow.id))).all())


def drafts(store: Store) -> list[DraftRow]:
    with store.read() as session:
        return list(session.exec(select(DraftRow)).all())


def of_state(store: Store, state: RunState) -> list[RunRow]:
    return [run for run in runs(store) if run.state == state]


def test_first_poll_of_fifty_entries_drafts_nothing_then_a_new_entry_is_drafted(
    store: Store,
) -> None:
    feed = FeedStub(feed_of(*range(1, 51)))
    p = make_poller(store, feed)
    recipe = items_recipe()

    p.poll(recipe)

    assert p.drafter.calls == 0
    skipped = of_state(store, RunState.SKIPPED)
    assert len(skipped) == 50 and {r.reason for r in skipped} == {SkipReason.BACKFILL}
    feed.entries = feed_of(*range(1, 52))
    p.clock.advance(timedelta(minutes=5))
    p.poll(recipe)
    assert p.drafter.calls == 1
    [drafted] = of_state(store, RunState.AWAITING_REVIEW)
    assert drafted.id == item_run_id("weekly-update", item_token(entry(51).item_id))
    assert drafted.slot_wall == "2026-11-30T12:05"  # the poll's slot, in the recipe's zone


def test_backfill_two_drafts_the_newest_two_of_the_first_poll(store: Store) -> None:
    p = make_poller(store, FeedStub(feed_of(*range(1, 51))))

    p.poll(items_recipe(backfill="2"))

    assert p.drafter.calls == 2
    ids = {run.id for run in of_state(store, RunState.AWAITING_REVIEW)}
    assert ids == {item_run_id("weekly-update", item_token(entry(n).item_id)) for n in (49, 50)}
    assert len(of_state(store, RunState.SKIPPED)) == 48


def test_a_feed_that_reorders_reserves_reissues_and_edits_makes_one_draft_per_item(
    store: Store,
) -> None:
    feed = FeedStub(feed_of(1, 2))
    p = make_poller(store, feed)
    recipe = items_recipe()
    p.poll(recipe)  # first poll: 1 and 2 were there already
    served = [
        feed_of(1, 2, 3, 4),  # two new entries
        list(reversed(feed_of(1, 2, 3, 4))),  # the same, reordered
        feed_of(3, 4),  # old ones dropped ...
        feed_of(1, 2, 3, 4),  # ... and served again
        [entry(4, guid="urn:uuid:new-guid-4"), *feed_of(1, 2, 3)],  # 4 under a new GUID
        [replace(entry(3), text="Edited after it was drafted.", title="Post 3 (updated)")],
    ]
    for document in served:
        feed.entries = document
        p.clock.advance(timedelta(minutes=5))
        p.poll(recipe)

    assert p.drafter.calls == 2
    assert len(drafts(store)) == 2 and len(runs(store)) == 4
    with store.read() as session:
        reissue = session.get(PolledItemRow, ("weekly-update", "blog", "urn:uuid:new-guid-4"))
        edited = session.exec(
            select(SnapshotItemRow).where(col(SnapshotItemRow.item_id) == entry(3).item_id)
        ).one()
    assert reissue is not None and reissue.same_as == entry(4).item_id
    assert edited.title == "Post 3"  # the run keeps what it was drafted from


def test_a_new_id_with_the_same_link_and_title_in_one_poll_is_one_item(store: Store) -> None:
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    recipe = items_recipe()
    p.poll(recipe)
    feed.entries = [entry(2), entry(2, guid="tag:blog,2026:2"), entry(1)]
    p.clock.advance(timedelta(minutes=5))

    p.poll(recipe)

    assert p.drafter.calls == 1 and len(runs(store)) == 2


def test_backpressure_makes_items_wait_oldest_first_and_never_lose_them(store: Store) -> None:
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    tight = items_recipe(pending_limit=1)
    p.poll(tight)
    feed.entries = feed_of(1, 2, 3, 4)
    p.clock.advance(timedelta(minutes=5))

    p.poll(tight)

    assert p.drafter.calls == 1
    waiting = of_state(store, RunState.PENDING)
    assert len(waiting) == 2 and {r.reason for r in waiting} == {PendingReason.ITEM_WAITS}
    [first] = of_state(store, RunState.AWAITING_REVIEW)
    assert first.id == item_run_id("weekly-update", item_token(entry(2).item_id))
    with store.transaction() as session:  # a reviewer decides: room for one more
        draft = session.exec(select(DraftRow)).one()
        draft.state = DraftState.REJECTED
        session.add(draft)
    p.clock.advance(timedelta(minutes=5))
    p.poll(tight)
    assert p.drafter.calls == 2
    drafted = {d.run_id for d in drafts(store)}
    assert item_run_id("weekly-update", item_token(entry(3).item_id)) in drafted  # oldest next


def test_an_item_waiting_past_item_ttl_is_skipped_stale(store: Store) -> None:
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    tight = items_recipe(pending_limit=1, item_ttl='"2d"')
    p.poll(tight)
    feed.entries = feed_of(1, 2, 3)
    p.clock.advance(timedelta(minutes=5))
    p.poll(tight)
    p.clock.advance(timedelta(days=2, minutes=1))

    p.poll(tight)

    [stale] = [run for run in of_state(store, RunState.SKIPPED) if run.reason != "backfill"]
    assert stale.reason == SkipReason.STALE_ITEM
    assert p.drafter.calls == 1 and not of_state(store, RunState.PENDING)
    digest = build_digest(store, items_config(), p.clock.now())
    assert digest.stale_items == {"weekly-update": 1}
    assert "(stale_item, 24h): *weekly-update* 1" in digest_text(digest)


def test_two_pollers_at_once_make_one_run_and_one_draft_per_item(store: Store) -> None:
    feed = FeedStub(feed_of(1))
    first, second = make_poller(store, feed, worker="a"), make_poller(store, feed, worker="b")
    recipe = items_recipe(pending_limit=10)
    first.poll(recipe)
    feed.entries, feed.gate = feed_of(1, 2, 3, 4), threading.Barrier(2)
    for p in (first, second):
        p.clock.advance(timedelta(minutes=5))
    threads = [threading.Thread(target=p.poll, args=(recipe,)) for p in (first, second)]

    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert first.drafter.calls + second.drafter.calls == 3
    assert len(drafts(store)) == 3 and len(runs(store)) == 4


def test_a_crash_between_the_poll_and_the_claim_loses_no_item_and_drafts_each_once(
    store: Store,
) -> None:
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    recipe = items_recipe()
    p.poll(recipe)
    feed.entries = feed_of(1, 2, 3)
    p.clock.advance(timedelta(minutes=5))

    def crash() -> None:
        raise Crash

    with hook(Failpoint.AFTER_POLL_COMMIT, crash), pytest.raises(Crash):
        p.poll(recipe)
    assert p.drafter.calls == 0 and len(of_state(store, RunState.PENDING)) == 2
    restarted = make_poller(store, feed, worker="w2")
    restarted.clock.set(p.clock.now() + timedelta(minutes=5))
    restarted.poll(recipe)

    assert restarted.drafter.calls == 2 and len(drafts(store)) == 2


def test_the_stale_pending_pass_leaves_waiting_items_to_their_polls(store: Store) -> None:
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    tight = items_recipe(pending_limit=1)
    p.poll(tight)
    feed.entries = feed_of(1, 2, 3)
    p.clock.advance(timedelta(minutes=5))
    p.poll(tight)
    p.clock.advance(timedelta(hours=1))
    dispatcher = SlotDispatcher(store, p.poller.drafting, p.clock, recipes={"weekly-update": tight})

    assert dispatcher.stale_pending_runs() == []


def test_an_item_run_given_back_by_a_dead_holder_is_drafted_again_whatever_its_age(
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

    with hook(Failpoint.AFTER_CLAIM_COMMIT, crash), pytest.raises(Crash):
        p.poll(recipe)
    [claimed] = of_state(store, RunState.RUNNING)
    p.clock.advance(timedelta(hours=3))  # far past misfire_grace
    from core.drafting.sweeper import sweep_expired_claims

    sweep_expired_claims(store, p.clock)
    dispatcher = SlotDispatcher(
        store, p.poller.drafting, p.clock, recipes={"weekly-update": recipe}
    )
    result = dispatcher.resume(claimed.id)

    assert result is not None and result.outcome == DraftOutcome.DRAFTED
    assert p.drafter.calls == 1 and len(drafts(store)) == 1


def test_an_item_run_keeps_its_poll_slot_as_its_slot(store: Store) -> None:
    p = make_poller(store, FeedStub(feed_of(7)))
    recipe = items_recipe(backfill="1")

    p.poll(recipe)

    [run] = runs(store)
    slot = latest_slot_at_or_before(recipe, T0)
    assert isinstance(slot, Slot) and run.slot_at == slot.fire_at


def test_surfaces_show_an_item_run_by_its_items_title_and_link(store: Store) -> None:
    from core.api.calendar import read_calendar
    from core.api.queries import list_runs

    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    recipe = items_recipe()
    p.poll(recipe)
    feed.entries = feed_of(1, 2)
    p.clock.advance(timedelta(minutes=5))
    p.poll(recipe)
    drafted = item_run_id("weekly-update", item_token(entry(2).item_id))

    with store.read() as session:
        listed = {run.id: run for run in list_runs(session, None, 10)}
        calendar = read_calendar(session, items_config(), p.clock.now(), 7)

    assert listed[drafted].item_title == "Post 2"
    assert listed[drafted].item_link == "https://blog.example.com/post-2"
    assert "Post 2 <https://blog.example.com/post-2>" in listed[drafted].label()
    assert [(e.run, e.item) for e in calendar] == [
        (drafted, "Post 2 <https://blog.example.com/post-2>")
    ]  # polls are no calendar slots; a backfilled item is not shown


@dataclass
class RecordingWebhook:
    """A destination keyed by effect key, as a webhook with an Idempotency-Key is: a send
    under a key it holds adds nothing; a look-up finds it."""

    posts: dict[str, str] = field(default_factory=dict)
    sends: int = 0

    @property
    def target(self) -> str:
        return "webhook"

    def publish(self, publication: Publication) -> str:
        self.sends += 1
        return self.posts.setdefault(publication.effect_key, f"post-{len(self.posts) + 1}")

    def lookup(self, query: PostQuery) -> str | None:
        return self.posts.get(query.effect_key)

    def link(self, external_id: str) -> str | None:
        return None

    def fit(self, text: str) -> Fit | None:
        return None


def test_each_new_item_is_published_once_however_often_it_is_polled(store: Store) -> None:
    hook_table = '\npublish = { to = "webhook", url = "https://hooks.example.com/in" }\n'
    config = parse_config(config_text().replace("0 9 * * mon", "*/5 * * * *") + ITEMS + hook_table)
    recipe = config.recipe("weekly-update")
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    p.poll(recipe)
    feed.entries = feed_of(1, 2, 3)
    webhook = RecordingWebhook()
    ledger = EffectLedger(store, p.clock, "w1")
    publishing = PublishingService(store, config, p.clock, ledger, lambda _recipe: webhook)

    for _ in range(3):  # polled, approved and published; polled and published again
        p.clock.advance(timedelta(minutes=5))
        p.poll(recipe)
        for draft in drafts(store):
            if draft.state == DraftState.READY:
                decide(
                    store,
                    config,
                    p.clock,
                    draft_key=draft.key,
                    revision=draft.revision,
                    verdict=Verdict.APPROVED,
                    user="U0EDITOR",
                    permitted=True,
                )
        publishing.publish_pending()

    assert p.drafter.calls == 2 and webhook.sends == 2 and len(webhook.posts) == 2
    assert sorted(r.state for r in runs(store) if r.reason != SkipReason.BACKFILL) == [
        RunState.SUCCEEDED,
        RunState.SUCCEEDED,
    ]


def test_galley_draft_refuses_an_items_recipe_and_poll_a_scheduled_one(store: Store) -> None:
    from core.api.galley import Galley
    from core.errors import SlotError
    from tests.conftest import make_config

    items = Galley(items_config(), store, drafter=InstantDrafter(), clock=FrozenClock(T0))
    scheduled = Galley(make_config(), store, drafter=InstantDrafter(), clock=FrozenClock(T0))

    with pytest.raises(SlotError, match="galley poll weekly-update"):
        items.draft("weekly-update")
    with pytest.raises(SlotError, match='no trigger = "items"'):
        scheduled.poll("weekly-update")
    assert runs(store) == []


def test_a_source_added_to_a_polled_recipe_backfills_what_it_already_has(store: Store) -> None:
    feed = FeedStub(feed_of(1, 2))
    p = make_poller(store, feed)
    p.poll(items_recipe())
    feed.entries = [replace(item, source="news") for item in feed_of(7, 8, 9)]
    p.clock.advance(timedelta(minutes=5))

    news = items_config().recipe("weekly-update").sources[0].model_copy(update={"name": "news"})
    p.poll(items_recipe().model_copy(update={"sources": (news,)}))  # now reading another source

    assert p.drafter.calls == 0
    assert {r.reason for r in runs(store)} == {SkipReason.BACKFILL} and len(runs(store)) == 5


def test_an_empty_first_poll_is_the_first_poll_the_next_item_is_drafted(store: Store) -> None:
    feed = FeedStub([])
    p = make_poller(store, feed)
    p.poll(items_recipe())  # a new project: no release yet
    feed.entries = feed_of(1)
    p.clock.advance(timedelta(minutes=5))

    p.poll(items_recipe())

    assert p.drafter.calls == 1 and len(drafts(store)) == 1


def test_items_waiting_for_a_recipe_that_left_the_config_are_closed(store: Store) -> None:
    feed = FeedStub(feed_of(1))
    p = make_poller(store, feed)
    tight = items_recipe(pending_limit=1)
    p.poll(tight)
    feed.entries = feed_of(1, 2, 3)
    p.clock.advance(timedelta(minutes=5))
    p.poll(tight)
    p.clock.advance(timedelta(hours=1))
    dispatcher = SlotDispatcher(store, p.poller.drafting, p.clock, recipes={})

    for run_id in dispatcher.stale_pending_runs():
        dispatcher.settle_pending(run_id)

    assert not of_state(store, RunState.PENDING)
    assert [r.reason for r in runs(store)].count(SkipReason.RECIPE_REMOVED) == 1
