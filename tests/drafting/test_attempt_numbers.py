"""Two model calls of one run never share an attempt number (docs/design.md §4): under
PostgreSQL's READ COMMITTED two calls under different claims (two redrafts of one draft
here; a redraft and a bump's draft alike) may read the run's last number at once; the
unique (run, number) decides and the second takes the next one, its call going ahead.
The interleaving is forced between one call's read and its write. Final state: the
attempt rows."""

from __future__ import annotations

from sqlmodel import col, select

from core.drafting.attempts import UnderClaim, begin_attempt
from core.drafting_policies import AttemptCause
from core.failpoints import Failpoint, hook
from core.models import AttemptRow
from core.review.queue import edit
from core.review.redraft_claims import RedraftClaim
from core.review.redrafting import RedraftService
from core.store.engine import Store
from core.store.leases import REDRAFT_CLAIMS, lease_now
from core.testing import FrozenClock, InstantDrafter
from tests.harness.races import skip_on_sqlite
from tests.review.test_redraft import BEN, claimed, config, drafted
from tests.review.test_redraft import clock as clock


def test_two_calls_of_one_run_reading_its_last_number_at_once_take_two_numbers(
    store: Store, db_url: str, clock: FrozenClock
) -> None:
    skip_on_sqlite(db_url)  # one writer: a read and its write are one locked transaction
    cfg = config()
    recipe = cfg.recipes["weekly-update"]
    key = drafted(store, clock, cfg)  # attempt 1: the slot's draft
    service = RedraftService(store, cfg, clock, InstantDrafter(), worker="w2")
    of_first = claimed(service, key, revision=1)
    saved = edit(store, cfg, clock, draft_key=key, revision=1, text="Ed.", user=BEN, permitted=True)
    assert saved.accepted
    of_second = claimed(service, key, revision=2)  # both redrafts hold their claims

    def begin(claim: RedraftClaim) -> int | None:
        held = UnderClaim(REDRAFT_CLAIMS, claim.key, claim.owner, claim.draft_key, claim.run_id)
        with store.transaction() as session:
            now = lease_now(session, clock)
            return begin_attempt(
                session, held, recipe, now, clock.now(), cause=AttemptCause.REDRAFT
            )

    numbers: dict[str, int | None] = {}

    def the_other_call_numbers_first() -> None:
        if "second" not in numbers:
            numbers["second"] = None  # its own read passes this point too
            numbers["second"] = begin(of_second)

    with hook(Failpoint.ATTEMPT_NUMBER_READ, the_other_call_numbers_first):
        numbers["first"] = begin(of_first)

    assert numbers == {"second": 2, "first": 3}
    with store.read() as session:
        rows = session.exec(
            select(AttemptRow).where(col(AttemptRow.draft_key) == key).order_by(AttemptRow.number)
        ).all()
    assert [(row.number, row.worker) for row in rows[1:]] == [
        (2, of_second.owner),
        (3, of_first.owner),
    ]
