"""What the operator API reads: every revision of a draft's text (people must be able
to see what the model wrote and what each edit changed: `galley show`, the notebook),
and runs indexed by slot, so the newest runs are read without sorting the history.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "draft_revisions",
        sa.Column("draft_key", sa.String(length=300), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("text_hash", sa.String(length=64), nullable=False),
        sa.Column("written_by", sa.String(length=200), nullable=False),
        sa.Column("written_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["draft_key"], ["drafts.key"]),
        sa.PrimaryKeyConstraint("draft_key", "revision"),
    )
    op.create_index("ix_runs_slot_at", "runs", ["slot_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_slot_at", table_name="runs")
    op.drop_table("draft_revisions")
