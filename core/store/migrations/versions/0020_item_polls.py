"""Items (issue 37, docs/design.md §29): each items recipe's latest poll and its failing
episode, so a source that stops answering is alerted once and settled when it answers.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def _utc(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "item_polls",
        sa.Column("recipe", sa.String(64), primary_key=True),
        _utc("polled_at", nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        _utc("failing_since"),
        sa.Column("lasting", sa.Boolean(), nullable=False),
        _utc("ended_since"),
    )


def downgrade() -> None:
    op.drop_table("item_polls")
