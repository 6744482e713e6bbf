"""Approval stages (issue 41.1, docs/design.md §22): each approval names the stage of the
recipe's `approval_stages` it was given at. Approvals given before 0017 were given at the
one stage there was, named "approval".

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch_op:
        batch_op.add_column(
            sa.Column("stage", sa.String(100), nullable=False, server_default="approval")
        )


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch_op:
        batch_op.drop_column("stage")
