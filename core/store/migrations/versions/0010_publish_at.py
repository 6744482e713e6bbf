"""Publish on time: an approved run waits for `runs.publish_at`, the instant it
may go out (its slot when drafting ahead, else its approval). The publish queue finds
the approved runs whose time has come through a partial index of approved runs only,
never by reading the history.

Runs approved before this migration publish as they did, at once: their time is their
last change.

Revision ID: 0010
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

APPROVED = "state = 'approved'"


def upgrade() -> None:
    # A plain ADD COLUMN: a batch copy of `runs` would drop a table drafts refer to.
    op.add_column("runs", sa.Column("publish_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(f"UPDATE runs SET publish_at = updated_at WHERE {APPROVED}")
    op.create_index(
        "ix_runs_publish_due",
        "runs",
        ["state", "publish_at"],  # state too: an equality the planners prefer to ix_runs_state_*
        sqlite_where=sa.text(APPROVED),
        postgresql_where=sa.text(APPROVED),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_publish_due", table_name="runs")
    op.drop_column("runs", "publish_at")  # SQLite 3.35+ drops a column in place
