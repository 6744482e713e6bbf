"""learn_from (issue 40.4, docs/design.md §27): the examples and reviewers' asks a run
was shown are kept with its snapshot, so a retry or a take-over shows the same ones.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("source_snapshots") as batch_op:
        batch_op.add_column(sa.Column("lessons", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("source_snapshots") as batch_op:
        batch_op.drop_column("lessons")
