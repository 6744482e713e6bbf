"""Batch drafting: an attempt may be an entry of a Message Batch (`mode`,
`batch_ref`, `wait_until`), and each batch Galley sent, or may have sent, is a row
leased to one poller at a time.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

UNFINISHED = "finished_at IS NULL"


def upgrade() -> None:
    # Plain ADD COLUMNs: a batch copy of `attempts` is not needed for nullable columns.
    op.add_column(
        "attempts",
        sa.Column("mode", sa.String(length=16), server_default="sync", nullable=False),
    )
    op.add_column("attempts", sa.Column("batch_ref", sa.String(length=64), nullable=True))
    op.add_column("attempts", sa.Column("wait_until", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_attempts_batch_ref", "attempts", ["batch_ref"])
    op.create_index(
        "ix_attempts_waiting",
        "attempts",
        ["mode", "wait_until"],
        sqlite_where=sa.text(UNFINISHED),
        postgresql_where=sa.text(UNFINISHED),
    )
    op.create_table(
        "batches",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("batch_id", sa.String(length=128), nullable=True, unique=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("may_exist", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_poll_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("polls", sa.Integer(), nullable=False),
        sa.Column("leased_by", sa.String(length=200), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
    )
    op.create_index("ix_batches_state_poll", "batches", ["state", "next_poll_at"])


def downgrade() -> None:
    op.drop_index("ix_batches_state_poll", table_name="batches")
    op.drop_table("batches")
    op.drop_index("ix_attempts_waiting", table_name="attempts")
    op.drop_index("ix_attempts_batch_ref", table_name="attempts")
    op.drop_column("attempts", "wait_until")
    op.drop_column("attempts", "batch_ref")
    op.drop_column("attempts", "mode")
