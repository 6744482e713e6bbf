"""Near-duplicates: each draft's closest match, and the attempt that re-drafted to avoid it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("drafts") as batch_op:
        batch_op.add_column(sa.Column("similar_to", sa.String(length=300), nullable=True))
        batch_op.add_column(sa.Column("similar_score", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("similar_method", sa.String(length=64), nullable=True))
        batch_op.create_index(
            "ix_drafts_recipe_state_updated", ["recipe", "state", "updated_at"], unique=False
        )
    with op.batch_alter_table("attempts") as batch_op:
        batch_op.add_column(
            sa.Column("redraft", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch_op:
        batch_op.drop_column("redraft")
    with op.batch_alter_table("drafts") as batch_op:
        batch_op.drop_index("ix_drafts_recipe_state_updated")
        batch_op.drop_column("similar_method")
        batch_op.drop_column("similar_score")
        batch_op.drop_column("similar_to")
