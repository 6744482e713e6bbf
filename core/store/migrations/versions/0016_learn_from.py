"""learn_from (issue 40.4, docs/design.md §27): the examples and reviewers' asks a run
was shown are kept with its snapshot, so a retry or a take-over shows the same ones.
And a post found gone is said on its review message once (issue 40.1, docs/design.md
§28): `post_checks.shown_at`, and a partial index of the gone posts not shown yet.

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

GONE_UNSHOWN = "state = 'gone' AND shown_at IS NULL"


def upgrade() -> None:
    with op.batch_alter_table("source_snapshots") as batch_op:
        batch_op.add_column(sa.Column("lessons", sa.Text(), nullable=True))
    with op.batch_alter_table("post_checks") as batch_op:
        batch_op.add_column(sa.Column("shown_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_post_checks_gone_unshown",
        "post_checks",
        ["receipt"],
        postgresql_where=sa.text(GONE_UNSHOWN),
        sqlite_where=sa.text(GONE_UNSHOWN),
    )


def downgrade() -> None:
    op.drop_index("ix_post_checks_gone_unshown", table_name="post_checks")
    with op.batch_alter_table("post_checks") as batch_op:
        batch_op.drop_column("shown_at")
    with op.batch_alter_table("source_snapshots") as batch_op:
        batch_op.drop_column("lessons")
