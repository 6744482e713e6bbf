"""Every periodic pass reads through an index that fits it, never a whole history table.
On a seeded history, each SELECT a pass issues is explained: SQLite's
`EXPLAIN QUERY PLAN`, PostgreSQL's `EXPLAIN` with sequential scans priced out, so a
scan that remains is one no index can serve.

A whole scan of a partial index is allowed: it holds only rows with work to do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlmodel import SQLModel, col, select

from bench.history_scale import CountingWorld, FixedClock
from bench.history_seed import NOW, REVIEW_CHANNEL, config_text, load, recipe_name
from core.api.decisions import read_decisions
from core.api.report import read_report
from core.drafting.learning import read_lessons
from core.drafting.service import DraftingService
from core.drafting.sweeper import sweep_expired_claims
from core.identity import publish_effect_key
from core.models import DraftRow, PostCheckRow
from core.operations.alerts import AlertService
from core.operations.digest import build_digest
from core.policies import PostCheck
from core.publishing.readings import PostReadings
from core.publishing.service import PublishingService
from core.review.outbox import ReviewOutbox
from core.review.queue import expire_overdue_drafts
from core.review.reminders import remind_waiting
from core.scheduling.catch_up import latest_recorded_slots
from core.scheduling.dispatch import SlotDispatcher
from core.scheduling.items import ItemPoller
from core.setup.config import parse_config
from core.slots.schedule import latest_slot_at_or_before
from core.sources.items import SourceItem
from core.store.effects import EffectLedger
from core.store.engine import Store

# a plan depends on a table's dead rows and statistics: each test here gets a new clone
pytestmark = pytest.mark.fresh_database

HISTORY_TABLES = {
    "runs",
    "drafts",
    "attempts",
    "effects",
    "events",
    "post_checks",
    "post_readings",
    "polled_items",
}
PARTIAL_INDEXES = {
    str(index.name)
    for table in SQLModel.metadata.sorted_tables
    for index in table.indexes
    if index.dialect_kwargs.get("sqlite_where") is not None
}


@pytest.fixture
def seeded(store: Store) -> Store:
    load(store, 3_000, recipes=5)
    _add_work(store)
    return store


def _add_work(store: Store) -> None:
    """One of each kind of work, so the passes' work paths are explained too."""
    earlier = (NOW - timedelta(minutes=5)).replace(tzinfo=None).isoformat(sep=" ")
    decided = f"decided_by = 'U0EDITOR', decided_at = '{earlier}'"
    statements = [  # a draft never posted; a decision not yet shown; a lapsed claim;
        # a backpressure episode; an approval to publish
        f"UPDATE drafts SET shown_state = NULL WHERE run_id = '{recipe_name(0)}@2026-11-30T11:00'",
        f"UPDATE drafts SET state = 'rejected' WHERE run_id = '{recipe_name(1)}@2026-11-30T11:01'",
        f"UPDATE drafts SET state = 'claimed', lease_until = '{earlier}', shown_state = NULL"
        f" WHERE run_id = '{recipe_name(2)}@2026-11-30T11:02'",
        f"UPDATE recipes SET backpressure_since = '{earlier}' WHERE name = '{recipe_name(3)}'",
        f"UPDATE drafts SET state = 'approved', {decided}"
        f" WHERE run_id = '{recipe_name(4)}@2026-11-30T11:04'",
        f"UPDATE runs SET state = 'approved', publish_at = '{earlier}'"
        f" WHERE id = '{recipe_name(4)}@2026-11-30T11:04'",
    ]
    with store.engine.begin() as connection:
        for statement in statements:
            connection.exec_driver_sql(statement)
    _a_post_found_gone(store, f"{recipe_name(4)}@2026-11-30T11:04")


def _a_post_found_gone(store: Store, run: str) -> None:
    """A published post found gone, not said on its message yet (docs/design.md §28)."""
    with store.transaction() as session:
        draft = session.exec(select(DraftRow).where(col(DraftRow.run_id) == run)).first()
        assert draft is not None
        session.add(
            PostCheckRow(
                receipt=publish_effect_key(draft.key, "mastodon:social.example"),
                recipe=draft.recipe,
                target="mastodon:social.example",
                external_id="1",
                published_at=NOW - timedelta(hours=1),
                state=PostCheck.GONE,
                gone_at=NOW,
                detail="404 at 11:00 UTC: Record not found",
            )
        )


def _passes(store: Store) -> dict[str, Callable[[], object]]:
    config = parse_config(config_text(recipes=5))
    clock, world = FixedClock(), CountingWorld()
    ledger = EffectLedger(store, clock, "plans:1")
    outbox = ReviewOutbox(store, ledger, world, channel=REVIEW_CHANNEL, call_lease=timedelta(1))
    alerts = AlertService(store, config, clock, ledger, world, timedelta(hours=4))
    publishing = PublishingService(store, config, clock, ledger, lambda _recipe: world)
    drafting = DraftingService(store, world, clock=clock)  # type: ignore[arg-type]
    dispatcher = SlotDispatcher(store, drafting, clock, recipes=dict(config.recipes))
    readings = PostReadings(store, config, clock, "plans:1", lambda _recipe: [], lambda *_: False)

    def catch_up() -> object:
        with store.read() as session:
            return latest_recorded_slots(session)

    reminding = parse_config(
        config_text(recipes=5).replace("[defaults]\n", '[defaults]\nremind_after = "1m"\n')
    )

    def learning() -> object:  # docs/design.md §27: a learn_from run's snapshot reads it
        with store.read() as session:
            return read_lessons(session, recipe_name(1), NOW)

    def report() -> object:  # docs/design.md §38: the weekly report, Home's summary
        with store.read() as session:
            recipes = [recipe_name(n) for n in range(5)]
            return read_report(session, recipes, NOW, timedelta(days=7))

    def decision_log(**how: Any) -> Callable[[], object]:
        def read() -> object:
            with store.read() as session:
                return read_decisions(session, config, limit=100, **how)

        return read

    return {
        "outbox: post": outbox.post_ready_drafts,
        "outbox: sync": outbox.sync_messages,
        "outbox: backpressure": lambda: outbox.announce_backpressure({}),
        "publishing": publishing.publish_pending,
        "alerts": alerts.sweep,
        "claim sweep": lambda: sweep_expired_claims(store, clock),
        "draft expiry": lambda: expire_overdue_drafts(store, config, clock),
        "digest": lambda: build_digest(store, config, NOW),
        "catch-up": catch_up,
        "alerts: settle": alerts.settle_resolved,
        "stale pending": dispatcher.stale_pending_runs,
        "reminders": lambda: remind_waiting(store, reminding, clock, ledger, world),
        "decision log": decision_log(),
        "decision log: a recipe's": decision_log(recipe=recipe_name(1)),
        "readings": readings.read_due,  # docs/design.md §28
        "learn_from": learning,
        "report": report,
        "items: poll": _items_poll(store, drafting, clock),  # docs/design.md §29
    }


def _items_poll(store: Store, drafting: DraftingService, clock: Any) -> Callable[[], object]:
    """An items recipe's poll of a feed with one new entry, against the seeded history."""
    items = parse_config(
        config_text(recipes=1).replace(f'name = "{recipe_name(0)}"', 'name = "items-01"')
        + '\ntrigger = "items"\nsource = { kind = "feed", url = "https://blog.example.com/" }\n'
    ).recipe("items-01")
    poller = ItemPoller(store, drafting, clock)
    entries = [
        SourceItem("blog.example.com", f"guid-{n}", f"Post {n}", f"https://b/{n}", NOW, "text")
        for n in range(3)
    ]
    poller.reader = lambda *_: list(entries)

    def poll() -> object:
        slot = latest_slot_at_or_before(items, NOW)
        assert slot is not None
        return poller.poll(items, slot)

    return poll


def _selects(store: Store, run: Callable[[], object]) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, params: Any, *_rest: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and not isinstance(params, list):
            seen.append((statement, params))

    sa.event.listen(store.engine, "before_cursor_execute", record)
    try:
        run()
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", record)
    return seen


def _sqlite_scans(connection: sa.Connection, statement: str, params: Any) -> Iterator[str]:
    for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params):
        detail = str(row[3])
        words = detail.split()
        whole = words[:1] == ["SCAN"] and words[1] in HISTORY_TABLES
        if whole and not any(name in words for name in PARTIAL_INDEXES):
            yield detail


def _postgres_scans(connection: sa.Connection, statement: str, params: Any) -> Iterator[str]:
    connection.exec_driver_sql("SET enable_seqscan = off")  # any index beats a scan now
    plan = connection.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", params).scalar()
    document = plan if isinstance(plan, list) else json.loads(str(plan))
    yield from _walk(document[0]["Plan"])


def _walk(node: dict[str, Any]) -> Iterator[str]:
    table, index = node.get("Relation Name"), node.get("Index Name")
    kind = node["Node Type"]
    if table in HISTORY_TABLES or (index and kind.startswith("Bitmap")):
        whole = kind == "Seq Scan" or (
            "Index" in kind and "Index Cond" not in node and index not in PARTIAL_INDEXES
        )
        if whole:
            yield f"{kind} on {table} using {index}"
    for child in node.get("Plans", []):
        yield from _walk(child)


def test_no_periodic_pass_scans_a_whole_history_table(seeded: Store) -> None:
    explain = _sqlite_scans if seeded.dialect == "sqlite" else _postgres_scans
    findings: dict[str, list[str]] = {}
    explained = 0
    for name, run in _passes(seeded).items():
        selects = _selects(seeded, run)
        assert selects, f"{name} issued no SELECT"
        with seeded.engine.connect() as connection:
            for statement, params in selects:
                explained += 1
                for scan in explain(connection, statement, params):
                    findings.setdefault(name, []).append(f"{scan}: {' '.join(statement.split())}")
    assert findings == {}
    assert explained >= len(_passes(seeded)) * 2  # the work paths were explained too


def test_an_alert_sweep_over_failures_told_already_reads_no_more_for_more_of_them(
    seeded: Store,
) -> None:
    """Failed runs of the last day are looked at every pass; those already told (the
    seeded history's, as Galley wrote them at the time) cost one read between them,
    never a transaction or a cause look-up each."""
    config = parse_config(config_text(recipes=5))
    clock, world = FixedClock(), CountingWorld()
    alerts = AlertService(
        seeded, config, clock, EffectLedger(seeded, clock, "plans:1"), world, timedelta(hours=4)
    )
    with seeded.read() as session:
        failed_today = session.exec(
            sa.text(
                "SELECT count(*) FROM runs WHERE state = 'failed' AND updated_at > :since"
            ).bindparams(since=(NOW - timedelta(days=1)).replace(tzinfo=None))
        ).one()[0]

    selects = _selects(seeded, alerts.sweep)

    assert failed_today >= 3  # the pass had failures to look at
    assert world.calls == 0  # and told nobody again
    assert len(selects) == 3  # open runs, the day's failures, which of them were told


def test_the_digests_count_of_decided_drafts_sorts_nothing(seeded: Store) -> None:
    """The 30-day window of decisions is read in group order (SQLite skip-scans
    ix_drafts_recipe_state_updated), not sorted into a temporary B-tree: at 200,000
    runs the sort was 24 of the digest's 43 ms of CPU (bench/history_scale.py)."""
    if seeded.dialect != "sqlite":
        pytest.skip("PostgreSQL groups by hashing; the sort is SQLite's")
    config = parse_config(config_text(recipes=5))
    selects = _selects(seeded, lambda: build_digest(seeded, config, NOW))
    [(statement, params)] = [
        (s, p) for s, p in selects if "count(" in s.lower() and "FROM drafts" in s and "IN (" in s
    ]

    with seeded.engine.connect() as connection:
        plan = [
            str(row[3])
            for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)
        ]

    assert not any("TEMP B-TREE" in step for step in plan), plan
