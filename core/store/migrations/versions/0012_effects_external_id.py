"""Look-up proof: a post already the proof of one publish receipt is never
another's, so a look-up asks, per candidate post, whether a receipt holds it: an index on
`effects.external_id` keeps that one read however long the history.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_effects_external_id", "effects", ["external_id"])


def downgrade() -> None:
    op.drop_index("ix_effects_external_id", table_name="effects")
