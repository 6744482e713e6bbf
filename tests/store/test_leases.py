"""The one lease machine (core/store/leases.py, docs/design.md §5), on both backends and
over two of the tables it serves: every statement names the owner, the states and, where
it matters, the expiry it may change, and a row that fails any of them is left as it is.

Slot and redraft claims go through the same statements; their own tests (test_claims,
test_redraft, test_concurrency) drive them through the services.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from core.models import BatchRow, EffectRow
from core.policies import EffectStep
from core.states import BatchState, EffectState
from core.store import leases
from core.store.engine import Store
from core.store.leases import BATCHES, EFFECT_RECEIPTS, LeaseTable
from core.testing import FrozenClock

LEASE = timedelta(seconds=30)
KEY = "k1"


def _batch(key: str, owner: str | None, until: datetime | None, state: str) -> BatchRow:
    return BatchRow(
        id=key,
        state=state,
        size=1,
        created_at=until or FrozenClock().now(),
        next_poll_at=FrozenClock().now(),
        leased_by=owner,
        lease_until=until,
    )


def _effect(key: str, owner: str | None, until: datetime | None, state: str) -> EffectRow:
    now = FrozenClock().now()
    return EffectRow(
        key=key,
        draft_key="d1",
        step=EffectStep.PUBLISH,
        payload_hash="0" * 64,
        state=EffectState(state),
        claimed_by=owner,
        lease_until=until,
        tries=1,
        created_at=now,
        updated_at=now,
    )


# each table, a state a lease is held in, and one it is not
TABLES = {
    "batches": (BATCHES, _batch, BatchState.WAITING, BatchState.ENDED),
    "effects": (EFFECT_RECEIPTS, _effect, EffectState.IN_FLIGHT, EffectState.SUCCEEDED),
}


class Leases:
    """One table's rows written by hand, and the machine's statements run against them."""

    def __init__(self, store: Store, kind: str) -> None:
        self.store, self.clock = store, FrozenClock()
        self.table, self._row, self.held, self.settled = TABLES[kind]

    def key_is(self, key: str) -> Any:
        table: LeaseTable = self.table
        return table.column(table.key) == key

    @property
    def now(self) -> datetime:
        return self.clock.now()

    def put(self, owner: str | None, until: datetime | None, state: str | None = None) -> None:
        with self.store.transaction() as session:
            session.add(self._row(KEY, owner, until, state or self.held))

    def do(self, verb: Any, *args: Any, rest: tuple[Any, ...] = (), **kwargs: Any) -> bool:
        """`verb(session, table, *args, now, *rest, **kwargs)`, timed by the test clock
        (`rest`: the states a verb may find, or what an acquisition must match)."""
        with self.store.transaction() as session:
            now = leases.lease_now(session, self.clock)
            return bool(verb(session, self.table, *args, now, *rest, **kwargs))

    def holder(self) -> tuple[str | None, datetime | None]:
        table: LeaseTable = self.table
        with self.store.read() as session:
            row = session.get(table.model, KEY)
            assert row is not None
            return getattr(row, table.owner), getattr(row, table.expiry)


@pytest.fixture(params=sorted(TABLES))
def machine(store: Store, request: pytest.FixtureRequest) -> Leases:
    return Leases(store, request.param)


def test_extend_renews_the_owners_lease_only_while_it_holds_it(machine: Leases) -> None:
    machine.put("a/1", machine.now + LEASE)
    assert not machine.do(leases.extend, KEY, "b/1", LEASE * 2)
    assert machine.holder() == ("a/1", machine.now + LEASE)
    assert machine.do(leases.extend, KEY, "a/1", LEASE * 2)
    assert machine.holder() == ("a/1", machine.now + LEASE * 2)


def test_extend_leaves_a_row_no_longer_in_a_held_state(machine: Leases) -> None:
    machine.put("a/1", machine.now + LEASE, machine.settled)
    assert not machine.do(leases.extend, KEY, "a/1", LEASE * 2)
    assert machine.holder() == ("a/1", machine.now + LEASE)


def test_the_fence_refuses_a_lapsed_lease_its_holder_never_renewed(machine: Leases) -> None:
    machine.put("a/1", machine.now - timedelta(seconds=1))
    assert not machine.do(leases.fence, KEY, "a/1", LEASE)
    assert machine.holder() == ("a/1", machine.now - timedelta(seconds=1))


def test_the_fence_refuses_another_owner_and_a_state_it_was_not_asked_for(
    machine: Leases,
) -> None:
    machine.put("a/1", machine.now + LEASE)
    assert not machine.do(leases.fence, KEY, "b/1", LEASE)
    assert not machine.do(leases.fence, KEY, "a/1", LEASE, rest=(machine.settled,))
    assert machine.holder() == ("a/1", machine.now + LEASE)
    assert machine.do(leases.fence, KEY, "a/1", LEASE * 2, rest=(machine.held,))
    assert machine.holder() == ("a/1", machine.now + LEASE * 2)


def test_a_take_over_needs_the_holder_read_and_a_lease_lapsed_past_its_grace(
    machine: Leases,
) -> None:
    lapsed_at = machine.now - timedelta(seconds=5)
    machine.put("a/1", lapsed_at)
    assert not machine.do(leases.take_over, KEY, "x/1", "b/1", LEASE)  # not the one read
    assert not machine.do(leases.take_over, KEY, "a/1", "b/1", LEASE, grace=LEASE)  # on wire
    assert machine.holder() == ("a/1", lapsed_at)
    assert machine.do(leases.take_over, KEY, "a/1", "b/1", LEASE, grace=timedelta(seconds=1))
    assert machine.holder() == ("b/1", machine.now + LEASE)


def test_a_live_lease_is_taken_over_only_when_asked_to(machine: Leases) -> None:
    machine.put("a/1", machine.now + LEASE)
    assert not machine.do(leases.take_over, KEY, "a/1", "b/1", LEASE)
    assert machine.do(leases.take_over, KEY, "a/1", "b/1", LEASE * 2, lapsed_only=False)
    assert machine.holder() == ("b/1", machine.now + LEASE * 2)


def test_a_settled_row_is_never_taken_over(machine: Leases) -> None:
    machine.put("a/1", machine.now - LEASE, machine.settled)
    assert not machine.do(leases.take_over, KEY, "a/1", "b/1", LEASE)
    assert not machine.do(leases.acquire, "b/1", LEASE, rest=(machine.key_is(KEY),))
    assert machine.holder() == ("a/1", machine.now - LEASE)


def test_acquire_takes_a_free_or_lapsed_row_and_never_a_live_one(machine: Leases) -> None:
    machine.put("a/1", machine.now + LEASE)
    assert not machine.do(leases.acquire, "b/1", LEASE, rest=(machine.key_is(KEY),))
    machine.clock.advance(LEASE + timedelta(seconds=1))
    assert machine.do(leases.acquire, "b/1", LEASE, rest=(machine.key_is(KEY),))
    assert machine.holder() == ("b/1", machine.now + LEASE)


def test_release_is_the_owners_alone(machine: Leases) -> None:
    machine.put("a/1", machine.now + LEASE)
    assert not machine.do(leases.release, KEY, "b/1")
    assert not machine.do(leases.release, KEY, "a/1", rest=(machine.settled,))
    assert machine.holder() == ("a/1", machine.now + LEASE)
    assert machine.do(leases.release, KEY, "a/1")
    assert machine.holder() == (None, None)


def test_only_lapsed_leases_in_a_held_state_are_listed_to_reap(machine: Leases) -> None:
    machine.put("a/1", machine.now + LEASE)
    with machine.store.read() as session:
        assert leases.lapsed_keys(session, machine.table, machine.now, 10) == []
        later = machine.now + LEASE + timedelta(seconds=1)
        assert leases.lapsed_keys(session, machine.table, later, 10) == [KEY]


def test_a_lapsed_call_may_still_be_on_the_wire_for_its_grace() -> None:
    lapsed = FrozenClock().now()
    grace = timedelta(seconds=30)
    assert leases.on_the_wire(lapsed, lapsed + timedelta(seconds=29), grace)
    assert not leases.on_the_wire(lapsed, lapsed + grace, grace)
    assert not leases.on_the_wire(None, lapsed, grace)
