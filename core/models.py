"""The tables. Every key of docs/design.md §2 is a primary key or a unique constraint here.

Times are stored as aware UTC on both SQLite and PostgreSQL. States are stored as their
enum value in a plain VARCHAR column, so they read the same in a SQL shell.
Schema changes go through an Alembic migration in `core/store/migrations/versions`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlmodel import Field, SQLModel, col

from core.policies import EffectStep, ImageSource, PollOutcome, PostCheck
from core.states import DraftState, EffectState, RunState


class UTCDateTime(sa.TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, on every backend."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        converted = value.astimezone(UTC)
        return converted.replace(tzinfo=None) if dialect.name == "sqlite" else converted

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _state_type(enum: type[StrEnum]) -> sa.Enum:
    return sa.Enum(
        enum,
        native_enum=False,
        create_constraint=False,
        length=32,
        values_callable=lambda members: [m.value for m in members],
    )


def _partial_index(name: str, *columns: str, where: str) -> sa.Index:
    """An index of only the rows a pass looks for (both backends support them)."""
    return sa.Index(name, *columns, sqlite_where=sa.text(where), postgresql_where=sa.text(where))


def _utc(nullable: bool = True, **kwargs: Any) -> Any:
    return Field(sa_type=UTCDateTime, nullable=nullable, **kwargs)


class RecipeRow(SQLModel, table=True):
    __tablename__ = "recipes"
    __table_args__ = (
        _partial_index("ix_recipes_backpressure", "name", where="backpressure_since IS NOT NULL"),
    )

    name: str = Field(primary_key=True, max_length=64)
    version: int = 1
    paused: bool = False
    paused_reason: str | None = None
    changed_by: str | None = None
    backpressure_since: datetime | None = _utc()  # start of the latest backpressure episode
    backpressure_resumed_at: datetime | None = _utc()  # when that episode ended
    updated_at: datetime = _utc(nullable=False)


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"
    __table_args__ = (
        sa.Index("ix_runs_recipe_state", "recipe", "state"),
        sa.Index("ix_runs_slot", "slot_at", "id"),  # `galley runs`, newest first, keyset
        sa.Index("ix_runs_state_slot", "state", "slot_at", "id"),  # by state; open runs
        sa.Index("ix_runs_recipe_slot", "recipe", "slot_at"),  # a recipe's latest run
        sa.Index("ix_runs_state_updated", "state", "updated_at"),  # recent failures, skips
        # approved runs by the time they may go out: the publish queue (docs/design.md §23)
        _partial_index("ix_runs_publish_due", "state", "publish_at", where="state = 'approved'"),
    )

    id: str = Field(primary_key=True, max_length=200)
    recipe: str = Field(foreign_key="recipes.name", max_length=64)
    slot_wall: str = Field(max_length=32)  # nominal local wall time, as in the run id
    slot_at: datetime = _utc(nullable=False)  # the instant the slot fires
    state: RunState = Field(sa_type=_state_type(RunState))
    reason: str | None = None
    version: int = 1
    draft_key: str | None = Field(default=None, max_length=300)
    manual: bool = False
    created_at: datetime = _utc(nullable=False)
    updated_at: datetime = _utc(nullable=False)
    publish_at: datetime | None = _utc()  # approved: when it may go out (docs/design.md §23)


class DraftRow(SQLModel, table=True):
    __tablename__ = "drafts"
    __table_args__ = (
        sa.Index("ix_drafts_recipe_state", "recipe", "state"),
        sa.Index("ix_drafts_state_updated", "state", "updated_at", "recipe"),  # digest counts
        _partial_index("ix_drafts_ready", "ready_at", where="state = 'ready'"),
        _partial_index("ix_drafts_claimed", "lease_until", where="state = 'claimed'"),
        _partial_index(
            "ix_drafts_message_behind",
            "key",
            where="shown_state <> state OR shown_revision <> revision",
        ),
        # near-duplicates and the recipe record read the drafts that reached a state lately
        sa.Index("ix_drafts_recipe_state_updated", "recipe", "state", "updated_at"),
        sa.Index("ix_drafts_ready_at", "ready_at"),  # the report's window (docs/design.md §38)
    )

    key: str = Field(primary_key=True, max_length=300)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=200)
    recipe: str = Field(max_length=64)
    platform: str = Field(max_length=64)
    version: int
    state: DraftState = Field(sa_type=_state_type(DraftState))
    claimed_by: str | None = Field(default=None, max_length=200)
    lease_until: datetime | None = _utc()
    # model calls this key had before the claim began (a retried failure starts afresh)
    attempts_before: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    text: str | None = Field(default=None, sa_type=sa.Text)
    revision: int = 0
    text_hash: str | None = Field(default=None, max_length=64)
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    ready_at: datetime | None = _utc()
    decided_by: str | None = None
    decided_at: datetime | None = _utc()
    decision_reason: str | None = None
    # What the review message in Slack shows; NULL until it is posted. A draft whose
    # state or revision differs is one whose message the outbox must bring up to date.
    shown_state: str | None = Field(default=None, max_length=32)
    shown_revision: int | None = None
    similar_to: str | None = Field(default=None, max_length=300)  # closest draft people saw
    similar_score: int | None = None  # 0-100; None until checked (set when it becomes ready)
    similar_method: str | None = Field(default=None, max_length=64)  # a SimilarityMethod
    created_at: datetime = _utc(nullable=False)
    updated_at: datetime = _utc(nullable=False)


class DraftRevisionRow(SQLModel, table=True):
    """One revision of a draft's text, kept once it is edited: revision 1 is the
    model's, each later one a person's. The draft row holds the current one."""

    __tablename__ = "draft_revisions"

    draft_key: str = Field(foreign_key="drafts.key", primary_key=True, max_length=300)
    revision: int = Field(primary_key=True)
    text: str = Field(sa_type=sa.Text)
    text_hash: str = Field(max_length=64)
    written_by: str = Field(max_length=200)
    written_at: datetime = _utc(nullable=False)


UNFINISHED = "finished_at IS NULL"


class AttemptRow(SQLModel, table=True):
    """One model call: the cost ledger. Written before the call, finished after it."""

    __tablename__ = "attempts"
    __table_args__ = (
        sa.UniqueConstraint("run_id", "number", name="uq_attempts_run_number"),
        sa.Index("ix_attempts_recipe_started", "recipe", "started_at"),  # tokens today
        sa.Index("ix_attempts_started", "started_at"),  # the report's cost, every recipe
        sa.Index(  # batch entries still waiting: a few rows among millions
            "ix_attempts_waiting",
            "mode",
            "wait_until",
            sqlite_where=sa.text(UNFINISHED),
            postgresql_where=sa.text(UNFINISHED),
        ),
    )

    id: str = Field(primary_key=True, max_length=210)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=200)
    recipe: str = Field(max_length=64, index=True)
    draft_key: str = Field(max_length=300, index=True)
    number: int
    worker: str = Field(max_length=200)
    model: str
    started_at: datetime = _utc(nullable=False)
    finished_at: datetime | None = _utc()
    outcome: str | None = Field(default=None, max_length=32)  # "ok" or a CallFailure
    http_status: int | None = None
    error: str | None = None
    request_id: str | None = None
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    latency_ms: int | None = None
    redraft: bool = Field(  # asked to avoid a near-duplicate (on_similar = redraft): once a slot
        default=False, sa_column_kwargs={"server_default": sa.false()}
    )
    cause: str = Field(  # an AttemptCause: a slot's draft, or a reviewer's redraft
        default="draft", max_length=32, sa_column_kwargs={"server_default": "draft"}
    )
    mode: str = Field(  # a Drafting: sync (one call) or batch (an entry of a Message Batch)
        default="sync", max_length=16, sa_column_kwargs={"server_default": "sync"}
    )
    batch_ref: str | None = Field(default=None, max_length=64, index=True)  # batches.id
    wait_until: datetime | None = _utc()  # a batch entry: drafted synchronously after this


class BatchRow(SQLModel, table=True):
    """One Message Batch Galley sent (or may have sent: a create whose answer was lost),
    leased to one poller at a time across replicas (docs/design.md §21)."""

    __tablename__ = "batches"
    __table_args__ = (sa.Index("ix_batches_state_poll", "state", "next_poll_at"),)

    id: str = Field(primary_key=True, max_length=64)  # Galley's own, written before the create
    batch_id: str | None = Field(default=None, max_length=128, unique=True)  # the API's
    state: str = Field(max_length=16)  # a BatchState
    size: int  # entries sent: a lost create is looked for among batches of this size
    may_exist: bool = True  # a create was (or may have been) sent and not answered
    created_at: datetime = _utc(nullable=False)  # before the create: find_again lists from it
    submitted_at: datetime | None = _utc()
    ended_at: datetime | None = _utc()
    next_poll_at: datetime = _utc(nullable=False)
    polls: int = 0
    leased_by: str | None = Field(default=None, max_length=200)
    lease_until: datetime | None = _utc()
    error: str | None = None


SINGLE_STAGE = "approval"  # the stage of a recipe without `approval_stages`


class ApprovalRow(SQLModel, table=True):
    """One person's approval of one exact revision (docs/design.md §22): the key makes a
    second click by the same person count once, and an edit starts the count again."""

    __tablename__ = "approvals"

    draft_key: str = Field(foreign_key="drafts.key", primary_key=True, max_length=300)
    revision: int = Field(primary_key=True)
    approver: str = Field(primary_key=True, max_length=200)
    approved_at: datetime = _utc(nullable=False)
    stage: str = Field(
        default=SINGLE_STAGE, max_length=100, sa_column_kwargs={"server_default": SINGLE_STAGE}
    )


class RedraftRow(SQLModel, table=True):
    """A reviewer's request for the next revision, keyed by draft key and the revision it
    rewrites: one request, one claim, one paid answer however often it is delivered."""

    __tablename__ = "redrafts"
    __table_args__ = (
        _partial_index("ix_redrafts_claimed", "lease_until", where="state = 'claimed'"),
        sa.Index("ix_redrafts_recipe_created", "recipe", "created_at"),  # feedback per recipe
    )

    key: str = Field(primary_key=True, max_length=330)
    draft_key: str = Field(foreign_key="drafts.key", index=True, max_length=300)
    run_id: str = Field(max_length=200)
    recipe: str = Field(max_length=64)
    from_revision: int
    note: str = Field(sa_type=sa.Text)
    requested_by: str = Field(max_length=200)
    state: str = Field(max_length=32)  # a RedraftState
    claimed_by: str | None = Field(default=None, max_length=200)
    lease_until: datetime | None = _utc()
    detail: str | None = None
    created_at: datetime = _utc(nullable=False)
    finished_at: datetime | None = _utc()


# Publications that succeeded, in ix_effects_published's own words and as literals: a
# query with bound values would not prove the index's predicate in PostgreSQL's generic
# plan (a prepared statement's sixth run on), and would scan every receipt.
PUBLISHED_RECEIPT = "step = 'publish' AND state = 'succeeded'"


class EffectRow(SQLModel, table=True):
    """The receipt of one external effect, keyed by its effect key."""

    __tablename__ = "effects"
    __table_args__ = (
        _partial_index(
            "ix_effects_unsettled", "step", where="state = 'in_flight' OR state = 'uncertain'"
        ),
        # alerts.settle_resolved: recent alerts posted, to rewrite once their run moved on
        _partial_index(
            "ix_effects_alerts_posted", "created_at", where="step = 'alert' AND state = 'succeeded'"
        ),
        # look-up proof: is this post already another receipt's? (publishing/lookup_proof.py)
        sa.Index("ix_effects_external_id", "external_id"),
        # publications lately succeeded, to be read back (publishing/readings.py,
        # docs/design.md §28)
        _partial_index("ix_effects_published", "updated_at", where=PUBLISHED_RECEIPT),
    )

    key: str = Field(primary_key=True, max_length=400)
    draft_key: str = Field(max_length=300, index=True)
    step: str = Field(max_length=32)
    payload_hash: str = Field(max_length=64)
    state: EffectState = Field(sa_type=_state_type(EffectState))
    external_id: str | None = None
    result: str | None = Field(default=None, sa_type=sa.Text)  # JSON
    detail: str | None = None
    claimed_by: str | None = Field(default=None, max_length=200)
    lease_until: datetime | None = _utc()
    tries: int = 1
    created_at: datetime = _utc(nullable=False)
    updated_at: datetime = _utc(nullable=False)


class ImageRow(SQLModel, table=True):
    """An image's bytes, stored once by their content hash (docs/design.md §32): already
    shaped to the limits of the targets it was taken for, so the bytes a reviewer
    approved are the bytes every target is sent. Written once, never changed."""

    __tablename__ = "images"

    sha256: str = Field(primary_key=True, max_length=64)
    media_type: str = Field(max_length=64)
    size: int  # bytes
    width: int
    height: int
    data: bytes = Field(sa_type=sa.LargeBinary)
    source: ImageSource = Field(sa_type=_state_type(ImageSource))
    created_at: datetime = _utc(nullable=False)


class PostCheckRow(SQLModel, table=True):
    """One published post read back (docs/design.md §28): verified once, then counted at
    each `engagement_at` offset. `due_at` is when it is next read (NULL: never again),
    so a pass finds its work through ix_post_checks_due whatever the history's length;
    a pass claims a row by moving `due_at` on, and writes under `claimed_by`."""

    __tablename__ = "post_checks"
    __table_args__ = (
        _partial_index("ix_post_checks_due", "due_at", where="due_at IS NOT NULL"),
        sa.Index("ix_post_checks_recipe_published", "recipe", "published_at"),  # a recipe's
        sa.Index("ix_post_checks_published", "published_at"),  # every recipe's, this week
        sa.Index("ix_post_checks_target_published", "target", "published_at"),  # lift baseline
        # posts found gone that their review message does not say yet (core/review/outbox.py)
        _partial_index(
            "ix_post_checks_gone_unshown", "receipt", where="state = 'gone' AND shown_at IS NULL"
        ),
    )

    receipt: str = Field(primary_key=True, max_length=400)  # the publish receipt's key
    recipe: str = Field(max_length=64)
    target: str = Field(max_length=200)
    external_id: str
    url: str | None = None
    published_at: datetime = _utc(nullable=False)
    state: PostCheck = Field(sa_type=_state_type(PostCheck))
    due_at: datetime | None = _utc()
    tries: int = 0  # reads since the last one that told (backoff grows with it)
    readings_done: int = 0  # `engagement_at` offsets read (or passed) so far
    claimed_by: str | None = Field(default=None, max_length=200)
    verified_at: datetime | None = _utc()
    gone_at: datetime | None = _utc()
    detail: str | None = None  # why it is gone, or why the last read could not tell
    shown_at: datetime | None = _utc()  # gone: when its review message came to say so


class PostReadingRow(SQLModel, table=True):
    """One engagement reading of a published post, kept (never overwritten)."""

    __tablename__ = "post_readings"
    __table_args__ = (sa.Index("ix_post_readings_recipe_read", "recipe", "read_at"),)

    receipt: str = Field(primary_key=True, max_length=400)
    label: str = Field(primary_key=True, max_length=16)  # the offset it was due at: `1h`, `1d`
    after_seconds: int  # that offset, in seconds after publication
    recipe: str = Field(max_length=64)
    target: str = Field(max_length=200)
    read_at: datetime = _utc(nullable=False)
    likes: int = 0
    reposts: int = 0
    replies: int = 0
    quotes: int = 0
    impressions: int | None = None
    note: str | None = None  # what the platform would not say (a LinkedIn scope missing)


def unsettled_receipt(step: EffectStep) -> sa.ColumnElement[bool]:
    """Receipts of `step` in flight or uncertain, in ix_effects_unsettled's own words:
    SQLite uses a partial index only where it can prove the query's condition implies it."""
    state = col(EffectRow.state)
    return sa.and_(
        sa.or_(state == EffectState.IN_FLIGHT, state == EffectState.UNCERTAIN),
        col(EffectRow.step) == step,
    )


# A person's change to a draft's text or its approval, in ix_events_changes' own words (a
# literal, as PUBLISHED_RECEIPT is, so both backends prove the partial index's predicate).
CHANGES = "decision = 'edit' OR decision = 'redraft' OR decision = 'unapprove'"


class EventRow(SQLModel, table=True):
    """One line of history: who or what changed which state, when and why."""

    __tablename__ = "events"
    __table_args__ = (  # the decision log, newest first, keyset (core/review/decision_log.py)
        _partial_index("ix_events_decisions", "at", "id", where="decision IS NOT NULL"),
        # the report's edits, redrafts and unapprovals of a window, read from the index alone
        _partial_index("ix_events_changes", "at", "subject_id", "decision", where=CHANGES),
    )

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _utc(nullable=False)
    subject: str = Field(max_length=16)  # run | draft | effect | recipe
    subject_id: str = Field(max_length=400)
    run_id: str | None = Field(default=None, index=True, max_length=200)
    from_state: str | None = Field(default=None, max_length=32)
    to_state: str = Field(max_length=32)
    actor: str = Field(max_length=200)
    reason: str | None = None
    decision: str | None = Field(default=None, max_length=16)  # a DecisionKind: a person's act
    revision: int | None = None  # the draft revision that decision was about


class DeliveryRow(SQLModel, table=True):
    """One inbound delivery seen (a Socket Mode envelope id): a redelivery finds its row."""

    __tablename__ = "deliveries"

    id: str = Field(primary_key=True, max_length=200)
    received_at: datetime = _utc(nullable=False, index=True)


class SourceSnapshotRow(SQLModel, table=True):
    """A run's snapshot was taken (docs/design.md §27): its items, possibly none, are the
    `snapshot_items` rows of the run, so an empty snapshot differs from none. Written once,
    by the claim's holder, before the model is paid for."""

    __tablename__ = "source_snapshots"

    run_id: str = Field(foreign_key="runs.id", primary_key=True, max_length=200)
    taken_by: str = Field(max_length=200)  # the claim's owner token
    taken_at: datetime = _utc(nullable=False)
    window_start: datetime | None = _utc()
    window_end: datetime = _utc(nullable=False)
    # optional sources not read, as JSON: [[name, answer], …]
    left_out: str = Field(default="[]", sa_type=sa.Text)
    # learn_from: the examples and reviewers' asks shown, as JSON (core/drafting/lessons.py)
    lessons: str | None = Field(default=None, sa_type=sa.Text)


class SnapshotItemRow(SQLModel, table=True):
    """One item a run drafts from, in the order the model is shown them."""

    __tablename__ = "snapshot_items"

    run_id: str = Field(foreign_key="source_snapshots.run_id", primary_key=True, max_length=200)
    position: int = Field(primary_key=True)
    source: str = Field(max_length=64)
    item_id: str = Field(max_length=500)
    title: str = Field(sa_type=sa.Text)
    link: str | None = Field(default=None, sa_type=sa.Text)
    published_at: datetime | None = _utc()
    text: str = Field(sa_type=sa.Text)
    content_hash: str = Field(max_length=64)
    # the image the item brings (docs/design.md §32): where, what it shows, and the hash of
    # the bytes kept when the snapshot was taken, or one line saying why none were
    image_url: str | None = Field(default=None, sa_type=sa.Text)
    image_caption: str | None = Field(default=None, sa_type=sa.Text)
    image_sha256: str | None = Field(default=None, max_length=64)
    image_note: str | None = Field(default=None, sa_type=sa.Text)


class SeenSourceItemRow(SQLModel, table=True):
    """An undated item's first sighting by a recipe, per version of its content: it is new
    for that run only, until its content changes (a page edited: its hash differs)."""

    __tablename__ = "seen_source_items"

    recipe: str = Field(primary_key=True, max_length=64)
    source: str = Field(primary_key=True, max_length=64)
    item_id: str = Field(primary_key=True, max_length=500)
    content_hash: str = Field(max_length=64)
    first_run_id: str = Field(max_length=200)
    first_seen_at: datetime = _utc(nullable=False)


class PolledSourceRow(SQLModel, table=True):
    """An items recipe's source polled once (docs/design.md §29): its first poll, even of an
    empty source, is the one that backfills; a later poll drafts what is new."""

    __tablename__ = "polled_sources"

    recipe: str = Field(primary_key=True, max_length=64)
    source: str = Field(primary_key=True, max_length=64)
    first_polled_at: datetime = _utc(nullable=False)


class ItemPollRow(SQLModel, table=True):
    """An items recipe's latest poll and its failing episode (docs/design.md §29): what
    `galley status` and Home show, and what its one alert per episode is keyed by. Written
    with the recipe row locked, so replicas polling at once count each failure once."""

    __tablename__ = "item_polls"

    recipe: str = Field(primary_key=True, max_length=64)
    polled_at: datetime = _utc(nullable=False)  # the latest poll's end
    outcome: PollOutcome = Field(sa_type=_state_type(PollOutcome))
    detail: str | None = Field(default=None, sa_type=sa.Text)  # a failure's answer, one line
    failures: int = 0  # failed polls in a row, this episode
    failing_since: datetime | None = _utc()  # this failing episode's first failure: its key
    lasting: bool = False  # a failure waiting cannot fix (401, 403, 404, not a feed)
    ended_since: datetime | None = _utc()  # the last episode to end (its alert is settled)
    # the latest entry not drafted as a re-issue of a known item (same link and title under
    # a new id): when, and its title and link, kept until a later one
    reissued_at: datetime | None = _utc()
    reissued: str | None = Field(default=None, sa_type=sa.Text)


class PolledItemRow(SQLModel, table=True):
    """An item an items recipe's poll has seen (docs/design.md §29), keyed by its own stable
    id, with the run it became (a backfill's, skipped, included) and what the model is
    shown of it. An item re-issued under a new id with the same link and title is a row
    `same_as` the first, naming the first's run: never a second run. A later edit changes
    nothing here."""

    __tablename__ = "polled_items"
    __table_args__ = (
        # one item per link and title: a re-issue finds the first by index, never by scan
        sa.Index(
            "ix_polled_items_identity",
            "recipe",
            "source",
            "identity",
            unique=True,
            sqlite_where=sa.text("same_as IS NULL AND identity IS NOT NULL"),
            postgresql_where=sa.text("same_as IS NULL AND identity IS NOT NULL"),
        ),
        sa.Index("ix_polled_items_run", "run_id"),
    )

    recipe: str = Field(primary_key=True, max_length=64)
    source: str = Field(primary_key=True, max_length=64)
    item_id: str = Field(primary_key=True, max_length=500)
    run_id: str = Field(max_length=200)
    same_as: str | None = Field(default=None, max_length=500)  # a re-issue: the first's id
    identity: str | None = Field(default=None, max_length=64)  # link and title hashed, or None
    title: str = Field(sa_type=sa.Text)
    link: str | None = Field(default=None, sa_type=sa.Text)
    published_at: datetime | None = _utc()
    text: str = Field(sa_type=sa.Text)
    seen_at: datetime = _utc(nullable=False)
    image_url: str | None = Field(default=None, sa_type=sa.Text)  # the image the poll saw
    image_caption: str | None = Field(default=None, sa_type=sa.Text)
