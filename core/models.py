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

from core.policies import EffectStep
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


class ApprovalRow(SQLModel, table=True):
    """One person's approval of one exact revision (docs/design.md §22): the key makes a
    second click by the same person count once, and an edit starts the count again."""

    __tablename__ = "approvals"

    draft_key: str = Field(foreign_key="drafts.key", primary_key=True, max_length=300)
    revision: int = Field(primary_key=True)
    approver: str = Field(primary_key=True, max_length=200)
    approved_at: datetime = _utc(nullable=False)


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


def unsettled_receipt(step: EffectStep) -> sa.ColumnElement[bool]:
    """Receipts of `step` in flight or uncertain, in ix_effects_unsettled's own words:
    SQLite uses a partial index only where it can prove the query's condition implies it."""
    state = col(EffectRow.state)
    return sa.and_(
        sa.or_(state == EffectState.IN_FLIGHT, state == EffectState.UNCERTAIN),
        col(EffectRow.step) == step,
    )


class EventRow(SQLModel, table=True):
    """One line of history: who or what changed which state, when and why."""

    __tablename__ = "events"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _utc(nullable=False)
    subject: str = Field(max_length=16)  # run | draft | effect | recipe
    subject_id: str = Field(max_length=400)
    run_id: str | None = Field(default=None, index=True, max_length=200)
    from_state: str | None = Field(default=None, max_length=32)
    to_state: str = Field(max_length=32)
    actor: str = Field(max_length=200)
    reason: str | None = None


class DeliveryRow(SQLModel, table=True):
    """One inbound delivery seen (a Socket Mode envelope id): a redelivery finds its row."""

    __tablename__ = "deliveries"

    id: str = Field(primary_key=True, max_length=200)
    received_at: datetime = _utc(nullable=False, index=True)
