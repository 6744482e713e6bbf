"""After publication (issue 40, docs/design.md §28): each published post read back once
(`post_checks`, found by the due time it is next read) and its engagement readings kept
(`post_readings`); publications lately succeeded found through a partial index.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

PUBLISHED = "step = 'publish' AND state = 'succeeded'"
DUE = "due_at IS NOT NULL"


def _utc(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "post_checks",
        sa.Column("receipt", sa.String(400), primary_key=True),
        sa.Column("recipe", sa.String(64), nullable=False),
        sa.Column("target", sa.String(200), nullable=False),
        sa.Column("external_id", sa.String(), nullable=False),
        sa.Column("url", sa.String(), nullable=True),
        _utc("published_at", nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        _utc("due_at"),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("readings_done", sa.Integer(), nullable=False),
        sa.Column("claimed_by", sa.String(200), nullable=True),
        _utc("verified_at"),
        _utc("gone_at"),
        sa.Column("detail", sa.String(), nullable=True),
    )
    op.create_index(
        "ix_post_checks_due",
        "post_checks",
        ["due_at"],
        sqlite_where=sa.text(DUE),
        postgresql_where=sa.text(DUE),
    )
    op.create_index("ix_post_checks_recipe_published", "post_checks", ["recipe", "published_at"])
    op.create_index("ix_post_checks_published", "post_checks", ["published_at"])
    op.create_table(
        "post_readings",
        sa.Column("receipt", sa.String(400), primary_key=True),
        sa.Column("label", sa.String(16), primary_key=True),
        sa.Column("after_seconds", sa.Integer(), nullable=False),
        sa.Column("recipe", sa.String(64), nullable=False),
        sa.Column("target", sa.String(200), nullable=False),
        _utc("read_at", nullable=False),
        sa.Column("likes", sa.Integer(), nullable=False),
        sa.Column("reposts", sa.Integer(), nullable=False),
        sa.Column("replies", sa.Integer(), nullable=False),
        sa.Column("quotes", sa.Integer(), nullable=False),
        sa.Column("impressions", sa.Integer(), nullable=True),
        sa.Column("note", sa.String(), nullable=True),
    )
    op.create_index("ix_post_readings_recipe_read", "post_readings", ["recipe", "read_at"])
    op.create_index(
        "ix_effects_published",
        "effects",
        ["updated_at"],
        sqlite_where=sa.text(PUBLISHED),
        postgresql_where=sa.text(PUBLISHED),
    )


def downgrade() -> None:
    op.drop_index("ix_effects_published", table_name="effects")
    op.drop_index("ix_post_readings_recipe_read", table_name="post_readings")
    op.drop_table("post_readings")
    op.drop_index("ix_post_checks_published", table_name="post_checks")
    op.drop_index("ix_post_checks_recipe_published", table_name="post_checks")
    op.drop_index("ix_post_checks_due", table_name="post_checks")
    op.drop_table("post_checks")
