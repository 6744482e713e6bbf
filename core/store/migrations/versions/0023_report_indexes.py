"""The report reads indexed aggregates (docs/design.md §38): drafts by when they were
made ready for review, model calls by when they started, each target's posts by when
they were published (its lift's baseline), and people's edits, redrafts and unapprovals
by time, read from the index alone.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_drafts_ready_at", "drafts", ["ready_at"])
    op.create_index("ix_attempts_started", "attempts", ["started_at"])
    op.create_index("ix_post_checks_target_published", "post_checks", ["target", "published_at"])
    changes = sa.text("decision = 'edit' OR decision = 'redraft' OR decision = 'unapprove'")
    op.create_index(
        "ix_events_changes",
        "events",
        ["at", "subject_id", "decision"],
        sqlite_where=changes,
        postgresql_where=changes,
    )


def downgrade() -> None:
    op.drop_index("ix_events_changes", table_name="events")
    op.drop_index("ix_post_checks_target_published", table_name="post_checks")
    op.drop_index("ix_attempts_started", table_name="attempts")
    op.drop_index("ix_drafts_ready_at", table_name="drafts")
