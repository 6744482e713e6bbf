"""The decision log (docs/design.md §35): the event row of each person's act
on a draft or a run names the act (`decision`) and the revision it was about, and a
partial index holds only those rows, so the newest N decisions cost N however long the
history. Earlier decisions the event rows tell apart are marked; their revision is unknown.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

DECIDED = "decision IS NOT NULL"
# Events written before 0015 that are decisions, in the words their writers used.
BACKFILL = {
    "approval": "subject = 'draft' AND from_state = 'ready' AND to_state = 'approved'",
    "rejection": "subject = 'draft' AND from_state = 'ready' AND to_state = 'rejected'",
    "edit": "subject = 'draft' AND reason LIKE 'edited: revision %'",
    "unapprove": "subject = 'draft' AND to_state = 'ready' AND reason LIKE 'unapproved by %'",
}


def upgrade() -> None:
    with op.batch_alter_table("events") as batch_op:
        batch_op.add_column(sa.Column("decision", sa.String(16), nullable=True))
        batch_op.add_column(sa.Column("revision", sa.Integer(), nullable=True))
    for kind, where in BACKFILL.items():
        op.execute(
            sa.text(f"UPDATE events SET decision = :kind WHERE {where}").bindparams(kind=kind)
        )
    op.create_index(
        "ix_events_decisions",
        "events",
        ["at", "id"],
        sqlite_where=sa.text(DECIDED),
        postgresql_where=sa.text(DECIDED),
    )


def downgrade() -> None:
    op.drop_index("ix_events_decisions", table_name="events")
    with op.batch_alter_table("events") as batch_op:
        batch_op.drop_column("revision")
        batch_op.drop_column("decision")
