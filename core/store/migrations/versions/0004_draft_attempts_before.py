"""Drafts remember how many model calls their key had before the claim began.

A person's `galley retry` of a failed draft claims the same key again; its attempt cap
(`max_attempts`) counts from the retry, not from the calls of the failed episode.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("drafts") as batch:
        batch.add_column(
            sa.Column("attempts_before", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("drafts") as batch:
        batch.drop_column("attempts_before")
