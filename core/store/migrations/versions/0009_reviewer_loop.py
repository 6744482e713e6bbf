"""The reviewer's loop: approvals by more than one person, and redrafts.

`approvals` holds one row per draft key, revision and person, so `approvals_required`
distinct people of one exact revision decide. `redrafts` holds one row per draft key and
revision a reviewer asked to redraft: the claim taken before the model is called.
`attempts.cause` says whether a model call drafted a slot or redrafted for a reviewer.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

CLAIMED = "state = 'claimed'"


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("draft_key", sa.String(length=300), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("approver", sa.String(length=200), nullable=False),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["draft_key"], ["drafts.key"]),
        sa.PrimaryKeyConstraint("draft_key", "revision", "approver"),
    )
    op.create_table(
        "redrafts",
        sa.Column("key", sa.String(length=330), nullable=False),
        sa.Column("draft_key", sa.String(length=300), nullable=False),
        sa.Column("run_id", sa.String(length=200), nullable=False),
        sa.Column("recipe", sa.String(length=64), nullable=False),
        sa.Column("from_revision", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("claimed_by", sa.String(length=200), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("detail", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["draft_key"], ["drafts.key"]),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_redrafts_draft_key", "redrafts", ["draft_key"])
    op.create_index("ix_redrafts_recipe_created", "redrafts", ["recipe", "created_at"])
    op.create_index(
        "ix_redrafts_claimed",
        "redrafts",
        ["lease_until"],
        sqlite_where=sa.text(CLAIMED),
        postgresql_where=sa.text(CLAIMED),
    )
    with op.batch_alter_table("attempts") as batch_op:
        batch_op.add_column(
            sa.Column("cause", sa.String(length=32), nullable=False, server_default="draft")
        )


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch_op:
        batch_op.drop_column("cause")
    op.drop_index("ix_redrafts_claimed", table_name="redrafts")
    op.drop_index("ix_redrafts_recipe_created", table_name="redrafts")
    op.drop_index("ix_redrafts_draft_key", table_name="redrafts")
    op.drop_table("redrafts")
    op.drop_table("approvals")
