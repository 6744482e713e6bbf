"""Deliveries: the envelope ids Slack has sent, so a redelivered envelope acts once.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_deliveries_received_at", "deliveries", ["received_at"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_received_at", table_name="deliveries")
    op.drop_table("deliveries")
