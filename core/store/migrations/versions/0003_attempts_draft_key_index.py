"""Index attempts by draft key: every attempt counts the draft's earlier attempts.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_attempts_draft_key", "attempts", ["draft_key"])


def downgrade() -> None:
    op.drop_index("ix_attempts_draft_key", table_name="attempts")
