"""After publication (docs/design.md §28): each published post read back `verify_after`
it went out (found: verified; gone: one alert), then its engagement counted at each
`engagement_at` offset, one reading kept per offset.

`PostReadings.read_due` is one pass of any replica: it claims only what is due, reads
counts in batches per target (as many posts per request as the platform takes), and
stops asking a platform that refused (429) until the time it named. A read that cannot
tell is tried again with backoff, and never taken as gone.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import partial

from sqlmodel import Session

from core.errors import ReadRefused
from core.failpoints import Failpoint, failpoint
from core.identity import is_manual_proof, platform_of_target, run_of_draft_key
from core.models import PostCheckRow
from core.policies import PostCheck
from core.ports import (
    Clock,
    PostCounts,
    PostFound,
    PostGone,
    PostReader,
    PostUnknown,
    Publisher,
)
from core.publishing import post_checks
from core.publishing.post_checks import Schedule, retry_delay
from core.setup.config import Config, Recipe, RecipeSettings
from core.store.engine import Store
from core.store.leases import lease_now, new_owner

log = logging.getLogger(__name__)

TellGone = Callable[[str, str, str, str | None], bool]
"""(publish receipt, run, headline, public URL) -> whether an alert was posted now."""

Outcome = PostCounts | PostGone | PostUnknown  # what reading one post's counts came to
PASS_LIMIT = 200  # rows one pass claims: what is left is due at the next pass
PLATFORM_NAMES = {
    "bluesky": "Bluesky",
    "mastodon": "Mastodon",
    "linkedin": "LinkedIn",
    "discord": "Discord",
    "threads": "Threads",
    "slack": "Slack",
    "webhook": "the webhook",
}


@dataclass
class ReadingPass:
    """What one pass came to, counted per row."""

    taken_up: int = 0  # publications seen for the first time
    verified: int = 0
    gone: int = 0
    unreadable: int = 0
    readings: int = 0
    cannot_tell: int = 0  # read again later, with backoff
    refused: int = 0  # a platform said 429: read again when it allows
    lost: int = 0  # claimed by another pass meanwhile: nothing written
    failed: int = 0  # reading it raised: logged, recorded on the row, read again later

    def add(self, other: ReadingPass) -> None:
        for counter in fields(self):
            setattr(self, counter.name, getattr(self, counter.name) + getattr(other, counter.name))


@dataclass(eq=False)  # a service: compared and hashed by identity
class PostReadings:
    store: Store
    config: Config
    clock: Clock
    worker: str
    publishers_for: Callable[[Recipe], Sequence[Publisher]]
    tell_gone: TellGone  # AlertService.alert_post_gone: told once per post
    limit: int = PASS_LIMIT
    _refused_until: dict[str, datetime] = field(default_factory=dict)

    def read_due(self) -> ReadingPass:
        """One pass: take up new publications, claim what is due, read it. A target whose
        reading raises is logged and the pass goes on to the next target."""
        done = ReadingPass()
        owner = new_owner(self.worker)
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            done.taken_up = post_checks.take_up_publications(
                session, now, lambda recipe: self._schedule(recipe).verify_after
            )
            claimed = post_checks.claim_due(session, now, owner, self.limit)
        marked = [row for row in claimed if is_manual_proof(row.external_id)]
        self._marked(marked, owner, done)  # taken up before marked rows were told apart
        by_target: dict[str, list[PostCheckRow]] = defaultdict(list)
        for row in (r for r in claimed if not is_manual_proof(r.external_id)):
            # one account per target id, whichever recipes post there
            by_target[row.target].append(row)
        for target, rows in by_target.items():
            try:
                self._read_target(rows, owner, done)
            except Exception:  # its rows' claims run out: due again in CLAIM_FOR
                log.exception("post_read_target_failed target=%s", target)
        return done

    def _read_target(self, rows: list[PostCheckRow], owner: str, done: ReadingPass) -> None:
        readers = {r.recipe: self._reader(r.recipe, r.target) for r in rows}
        reader = next((found for found in readers.values() if found is not None), None)
        orphans = [r for r in rows if reader is None or readers[r.recipe] is None]
        self._unreadable(orphans, owner, done)
        if reader is None:
            return
        for row in rows:
            if row.state == PostCheck.DUE and readers[row.recipe] is not None:
                self._isolated(row, owner, done, partial(self._verify, reader, row, owner, done))
        counted = [
            r for r in rows if r.state == PostCheck.VERIFIED and readers[r.recipe] is not None
        ]
        self._count(reader, counted, owner, done)

    def _isolated(
        self, row: PostCheckRow, owner: str, done: ReadingPass, step: Callable[[], object]
    ) -> None:
        """One row's step; one that raises is logged and recorded on its row as a read
        that could not tell, and the pass goes on (one bad row never stops a pass)."""
        try:
            step()
        except Exception as exc:
            self._failed(row, owner, exc, done)

    def _failed(self, row: PostCheckRow, owner: str, exc: Exception, done: ReadingPass) -> None:
        done.failed += 1
        log.exception("post_read_failed receipt=%s", row.receipt, exc_info=exc)
        why = PostUnknown(f"reading it failed: {type(exc).__name__}: {exc}")
        try:
            with self.store.transaction() as session:
                self._later(session, row, owner, lease_now(session, self.clock), why)
        except Exception:  # not even recorded: its claim runs out, due again in CLAIM_FOR
            log.exception("post_read_failure_unrecorded receipt=%s", row.receipt)

    # --- verification ---

    def _verify(self, reader: PostReader, row: PostCheckRow, owner: str, done: ReadingPass) -> None:
        found = reader.read_post(row.external_id, row.receipt)
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            if isinstance(found, PostFound):
                schedule = self._schedule(row.recipe)
                kept = post_checks.finish(
                    session,
                    row,
                    owner,
                    state=PostCheck.VERIFIED,
                    verified_at=now,
                    tries=0,
                    detail=None,
                    due_at=schedule.next_reading(row.published_at, row.readings_done)
                    if reader.counts_per_request
                    else None,  # verified, and nothing to count (a webhook)
                )
                done.verified += kept
                done.lost += not kept
                return
            kept = self._settle(session, row, owner, now, found, done)
        if kept and isinstance(found, PostGone):
            self._tell_gone(row, _said(found, now))

    def _settle(
        self,
        session: Session,
        row: PostCheckRow,
        owner: str,
        now: datetime,
        found: PostGone | PostUnknown,
        done: ReadingPass,
    ) -> bool:
        """A read that found the post gone (never read again), or could not tell (read
        again later, until its last reading's time has passed)."""
        if isinstance(found, PostGone):
            kept = post_checks.finish(
                session,
                row,
                owner,
                state=PostCheck.GONE,
                gone_at=now,
                detail=f"{_said(found, now)}: {found.detail}",
                due_at=None,
            )
            done.gone += kept
        else:
            kept = self._later(session, row, owner, now, found)
            done.refused += kept and found.retry_after is not None
            done.cannot_tell += kept and found.retry_after is None
        done.lost += not kept
        return kept

    def _tell_gone(self, row: PostCheckRow, said: str) -> None:
        platform = platform_of_target(row.target)
        name = PLATFORM_NAMES.get(platform, platform)
        headline = f"Published to {name}, then gone ({said})."
        run = run_of_draft_key(row.receipt)
        self.tell_gone(row.receipt, run, headline, row.url)

    # --- engagement ---

    def _count(
        self, reader: PostReader, rows: list[PostCheckRow], owner: str, done: ReadingPass
    ) -> None:
        """Counts in batches of what one request takes; after a refusal the rest of this
        target's rows wait until the time the platform named (paced, not hammered). A
        post the answer leaves out is read back by itself: only that read may say gone."""
        for batch in post_checks.chunks(rows, reader.counts_per_request):
            answer = self._counts_of(reader, batch)
            found = {row.receipt: self._reading_of(reader, row, answer) for row in batch}
            self._keep_batch(batch, found, owner, done)

    def _keep_batch(
        self,
        batch: Sequence[PostCheckRow],
        found: Mapping[str, Outcome | Exception],
        owner: str,
        done: ReadingPass,
    ) -> None:
        """A batch's outcomes in one transaction; should one row's write raise, the batch
        is written again row by row, each in its own transaction, so only that row fails
        (recorded on it) and the others are kept. A row whose read raised is recorded."""
        kept_rows: list[tuple[PostCheckRow, Outcome]] = []
        raised: list[tuple[PostCheckRow, Exception]] = []
        for row in batch:
            outcome = found[row.receipt]
            if isinstance(outcome, Exception):
                raised.append((row, outcome))
            else:
                kept_rows.append((row, outcome))
        tally = ReadingPass()
        try:
            gone = self._keep_rows(kept_rows, owner, tally)
        except Exception:
            log.exception("post_readings_batch_failed target=%s", batch[0].target)
            tally, gone = ReadingPass(), []
            for row, reading in kept_rows:
                try:
                    gone += self._keep_rows([(row, reading)], owner, tally)
                except Exception as exc:
                    self._failed(row, owner, exc, tally)
        done.add(tally)
        for row, error in raised:
            self._failed(row, owner, error, done)
        for row, said, at in gone:  # told once: the row is never read again
            self._tell_gone(row, _said(said, at))

    def _keep_rows(
        self,
        rows: Sequence[tuple[PostCheckRow, Outcome]],
        owner: str,
        tally: ReadingPass,
    ) -> list[tuple[PostCheckRow, PostGone, datetime]]:
        """`rows`' outcomes in one transaction; the rows found gone, to be told."""
        gone = []
        with self.store.transaction() as session:
            now = lease_now(session, self.clock)
            for row, reading in rows:
                kept = self._keep(session, row, owner, now, reading, tally)
                if kept and isinstance(reading, PostGone):
                    gone.append((row, reading, now))
        return gone

    def _counts_of(
        self, reader: PostReader, batch: Sequence[PostCheckRow]
    ) -> Mapping[str, PostCounts] | PostUnknown:
        target = batch[0].target
        try:
            return self._refused(target) or reader.read_counts([r.external_id for r in batch])
        except ReadRefused as exc:
            return self._refuse(target, exc)
        except Exception as exc:
            log.exception("post_counts_failed target=%s", target)
            return PostUnknown(f"reading counts failed: {type(exc).__name__}: {exc}")

    def _reading_of(
        self,
        reader: PostReader,
        row: PostCheckRow,
        answer: Mapping[str, PostCounts] | PostUnknown,
    ) -> PostCounts | PostGone | PostUnknown | Exception:
        """The row's counts; left out of an answer, the post read back by itself."""
        if isinstance(answer, PostUnknown):
            return answer
        counts = answer.get(row.external_id)
        if counts is not None:
            return counts
        try:
            back = reader.read_post(row.external_id, row.receipt)
        except Exception as exc:
            return exc
        return _NOT_IN_ANSWER if isinstance(back, PostFound) else back

    def _keep(
        self,
        session: Session,
        row: PostCheckRow,
        owner: str,
        now: datetime,
        reading: PostCounts | PostGone | PostUnknown,
        done: ReadingPass,
    ) -> bool:
        failpoint(Failpoint.READING_KEEP)
        if isinstance(reading, PostCounts):
            schedule = self._schedule(row.recipe)
            kept = post_checks.keep_reading(session, row, owner, reading, now, schedule)
            done.readings += kept
            done.lost += not kept
            return kept
        return self._settle(session, row, owner, now, reading, done)

    def _refused(self, target: str) -> PostUnknown | None:
        until = self._refused_until.get(target)
        if until is None or until <= self.clock.now():
            return None
        wait = (until - self.clock.now()).total_seconds()
        return PostUnknown(f"{target} refused reads until {until:%H:%M:%S}", wait)

    def _refuse(self, target: str, exc: ReadRefused) -> PostUnknown:
        wait = retry_delay(1, exc.retry_after)
        self._refused_until[target] = self.clock.now() + wait
        return PostUnknown(str(exc), wait.total_seconds())

    # --- shared ---

    def _later(
        self, session: Session, row: PostCheckRow, owner: str, now: datetime, why: PostUnknown
    ) -> bool:
        tries = row.tries + 1
        log.info("post_read_cannot_tell receipt=%s tries=%d why=%s", row.receipt, tries, why.why)
        schedule = self._schedule(row.recipe)
        return post_checks.read_again(session, row, owner, now, why, schedule)

    def _marked(self, rows: list[PostCheckRow], owner: str, done: ReadingPass) -> None:
        """Rows of receipts a person marked published: no post id to read, never due."""
        if not rows:
            return
        with self.store.transaction() as session:
            for row in rows:
                detail = post_checks.marked_detail(row.external_id)
                kept = post_checks.finish(
                    session, row, owner, state=PostCheck.MARKED, detail=detail, due_at=None
                )
                done.lost += not kept

    def _unreadable(self, rows: list[PostCheckRow], owner: str, done: ReadingPass) -> None:
        if not rows:
            return
        with self.store.transaction() as session:
            for row in rows:
                kept = post_checks.finish(
                    session, row, owner, state=PostCheck.UNREADABLE, due_at=None
                )
                done.unreadable += kept
                done.lost += not kept

    def _reader(self, recipe_name: str, target: str) -> PostReader | None:
        recipe = self.config.recipes.get(recipe_name)
        if recipe is None:
            return None
        for publisher in self.publishers_for(recipe):
            if publisher.target == target and isinstance(publisher, PostReader):
                return publisher
        return None

    def _schedule(self, recipe_name: str) -> Schedule:
        recipe = self.config.recipes.get(recipe_name)
        settings = recipe if recipe is not None else RecipeSettings()
        return Schedule(settings.verify_after, settings.engagement_at)


_NOT_IN_ANSWER = PostUnknown(
    "the counts answer did not hold this post, and reading it back found it (not indexed yet)"
)


def _said(gone: PostGone, now: datetime) -> str:
    return f"{gone.status} at {now:%H:%M} UTC"
