"""What a run drafts from (docs/design.md §27): its snapshot, taken once under the run's
claim before the model is paid for, and read back by every later attempt.

The sources are read outside any transaction, with the claim's heartbeat running; the
items are stored in one transaction fenced by the claim's owner token, so a holder that
lost its claim stores nothing and a holder killed before storing leaves nothing. A run
whose snapshot is stored never reads the network again. A `learn_from` recipe's examples
and reviewers' asks are read from the history in that same transaction and kept with the
items (core/drafting/learning.py). Never calls the model.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sqlmodel import Session

from core.drafting.attempts import Backoff
from core.drafting.claims import Claim
from core.drafting.learning import read_lessons
from core.drafting_policies import LearnFrom, OnEmpty
from core.egress.way_out import Egress
from core.errors import LostClaim
from core.failpoints import Failpoint, failpoint
from core.images.library import ImageLibrary
from core.images.source_images import keep_item_image
from core.policies import FailReason, ImageSource, SkipReason, SourceKind
from core.ports import Clock
from core.setup.config import Config, Recipe
from core.slots.schedule import Slot
from core.sources.items import ReadContext, SourceItem, SourceReadError, Window
from core.sources.polled import item_of_run
from core.sources.reading import read_source
from core.sources.snapshot import LeftOut, Snapshot, store_snapshot, stored_snapshot
from core.sources.specs import SourceSpec
from core.sources.window import window_for
from core.store.engine import Store
from core.store.leases import DRAFT_CLAIMS, fence, lease_now

READ_TRIES = 3  # a timeout, a 5xx or a 429 is asked again, this many times in all
Reader = Callable[[SourceSpec, Window, ReadContext], list[SourceItem]]


@dataclass(frozen=True)
class SourceAccess:
    """What readers need beside a recipe: where `file` sources are, and the tokens."""

    config_dir: Path
    github_token: str | None = None
    slack_token: str | None = None
    slack_api: str | None = None
    user_names: dict[str, str] = field(default_factory=dict)  # Slack ids, looked up once
    egress: Egress = field(default_factory=Egress)  # `[egress] allow`

    @classmethod
    def of(cls, config: Config, environ: Mapping[str, str] | None = None) -> SourceAccess:
        env = os.environ if environ is None else environ
        folder = config.path.parent if config.path is not None else Path.cwd()
        return cls(
            config_dir=folder.resolve(),
            github_token=env.get("GALLEY_GITHUB_TOKEN") or None,
            slack_token=env.get("SLACK_BOT_TOKEN") or None,
            slack_api=env.get("GALLEY_SLACK_API_URL") or None,
            egress=Egress(config.egress),
        )

    def context(self, recipe: Recipe) -> ReadContext:
        return ReadContext(
            config_dir=self.config_dir,
            timeout=recipe.call_timeout.total_seconds(),
            github_token=self.github_token,
            slack_token=self.slack_token,
            slack_api=self.slack_api,
            user_names=self.user_names,
            egress=self.egress,
        )


@dataclass(frozen=True)
class Refused:
    """The run ends before any model call: skipped (`no_news`) or failed (`source_failed`)."""

    reason: SkipReason | FailReason
    detail: str
    retryable: bool = True  # a failed read a later read may pass (a timeout, a 5xx)


def read_sources(
    recipe: Recipe,
    window: Window,
    context: ReadContext,
    *,
    reader: Reader = read_source,
    backoff: Backoff | None = None,
    lost: threading.Event | None = None,
) -> Snapshot | Refused:
    """Every source of `recipe` over `window`, in config order. A retryable failure is
    asked again (READ_TRIES in all); a required source that still fails refuses the run
    naming it and its answer; an optional one is left out."""
    items: list[SourceItem] = []
    left_out: list[LeftOut] = []
    for spec in recipe.sources:
        try:
            items += _read_with_retries(spec, window, context, reader, backoff or Backoff(), lost)
        except SourceReadError as failure:
            if spec.required:
                said = f"source {spec.label!r}: {failure.answer}"
                return Refused(FailReason.SOURCE_FAILED, said, retryable=failure.retryable)
            left_out.append(LeftOut(spec.label, failure.answer, retryable=failure.retryable))
    return Snapshot(items=tuple(items), left_out=tuple(left_out))


def _read_with_retries(
    spec: SourceSpec,
    window: Window,
    context: ReadContext,
    reader: Reader,
    backoff: Backoff,
    lost: threading.Event | None,
) -> list[SourceItem]:
    for number in range(1, READ_TRIES + 1):
        try:
            return reader(spec, window, context)
        except SourceReadError as failure:
            if not failure.retryable or number == READ_TRIES:
                raise
            if lost is not None and lost.wait(backoff.delay(number, None)):
                raise LostClaim(f"claim lost while reading source {spec.label!r}") from None
    raise AssertionError("unreachable")


class RunBasis:
    """Takes a run's snapshot once, under its claim, and reads it back afterwards."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        access: SourceAccess | None = None,
        *,
        reader: Reader = read_source,
        backoff: Backoff | None = None,
    ) -> None:
        self.store, self.clock = store, clock
        self.access = access or SourceAccess(config_dir=Path.cwd().resolve())
        self.reader, self.backoff = reader, backoff or Backoff()
        self.library = ImageLibrary(store, clock)  # a source item's image, kept by hash

    def stored(self, recipe: Recipe, run_id: str) -> Snapshot | None:
        """The run's stored snapshot; None for a recipe that keeps none, or none taken."""
        if not recipe.takes_snapshot:
            return None
        with self.store.read() as session:
            return stored_snapshot(session, run_id)

    def take(
        self, recipe: Recipe, slot: Slot, claim: Claim, lost: threading.Event | None = None
    ) -> Snapshot | Refused | None:
        """The run's snapshot: the stored one, else read now and stored under the claim's
        fence (LostClaim when the claim is no longer ours). None for a recipe that keeps
        none (no sources, no `learn_from`); `Refused` for an empty window under
        `on_empty = "skip"` or a required source that could not be read (nothing stored:
        a retry reads again)."""
        if not recipe.takes_snapshot:
            return None
        # A run this claim opened has had no holder before it: nothing can be stored yet.
        snapshot = None if claim.opened_run else self.stored(recipe, claim.run_id)
        if snapshot is None and slot.item is not None:  # an item run drafts from its item
            snapshot = self._store_item(recipe, claim, slot)
            failpoint(Failpoint.AFTER_SNAPSHOT_COMMIT)
        if snapshot is None:
            window = window_for(recipe, slot)
            read = read_sources(
                recipe,
                window,
                self.access.context(recipe),
                reader=self.reader,
                backoff=self.backoff,
                lost=lost,
            )
            if isinstance(read, Refused):
                return read
            snapshot = self._store(recipe, claim, window, read)
            failpoint(Failpoint.AFTER_SNAPSHOT_COMMIT)
        if recipe.sources and snapshot.empty and recipe.on_empty == OnEmpty.SKIP:
            return Refused(SkipReason.NO_NEWS, _nothing_new(recipe, snapshot))
        return snapshot

    def _store_item(self, recipe: Recipe, claim: Claim, slot: Slot) -> Snapshot:
        """An item run's snapshot is its item as the poll recorded it (docs/design.md §29):
        its text is not read again, and an edit upstream since does not change it. The
        image it brings is downloaded and kept first (docs/design.md §32), outside any
        transaction, so the stored snapshot names the bytes every later attempt reads."""
        with self.store.read() as session:
            item = item_of_run(session, claim.run_id)
        if item is not None and recipe.source_images:
            item = self._with_image(recipe, item)
        with self.store.transaction() as session:
            self._fence(session, recipe, claim)
            return store_snapshot(
                session,
                recipe=recipe.name,
                run_id=claim.run_id,
                owner=claim.owner,
                window=Window(start=None, end=slot.fire_at),
                read=Snapshot(items=() if item is None else (item,)),
                now=self.clock.now(),
            )

    def _with_image(self, recipe: Recipe, item: SourceItem) -> SourceItem:
        """The item with its image kept, or a note why not: a feed item's own image, else
        its linked page's og:image; a page's og:image (docs/design.md §32)."""
        spec = next((s for s in recipe.sources if s.label == item.source), None)
        kind = spec.kind if spec is not None else None
        return keep_item_image(
            item,
            self.library,
            [target.target for target in recipe.targets],
            self.access.context(recipe),
            own=ImageSource.OG_IMAGE if kind == SourceKind.URL else ImageSource.FEED_ENCLOSURE,
            follow_link=kind == SourceKind.FEED,
        )

    def _fence(self, session: Session, recipe: Recipe, claim: Claim) -> None:
        now = lease_now(session, self.clock)  # the fence's UPDATE locks the claimed draft
        if not fence(
            session, DRAFT_CLAIMS, claim.draft_key, claim.owner, recipe.takeover_after, now
        ):
            raise LostClaim(f"claim on {claim.draft_key} is no longer held by {claim.owner}")

    def _store(self, recipe: Recipe, claim: Claim, window: Window, read: Snapshot) -> Snapshot:
        with self.store.transaction() as session:
            self._fence(session, recipe, claim)
            if recipe.learn_from == LearnFrom.TOP:  # docs/design.md §27: read with the items
                read = dataclasses.replace(
                    read, lessons=read_lessons(session, recipe.name, self.clock.now())
                )
            return store_snapshot(
                session,
                recipe=recipe.name,
                run_id=claim.run_id,
                owner=claim.owner,
                window=window,
                read=read,
                now=self.clock.now(),
            )


def _nothing_new(recipe: Recipe, snapshot: Snapshot) -> str:
    names = ", ".join(spec.label for spec in recipe.sources)
    gone = "; ".join(g.line() for g in snapshot.left_out)
    return f"no new items in the window from {names}" + (f"; left out: {gone}" if gone else "")
