"""Items: one run per new item (issue 37, docs/design.md §29): the items an items recipe's
polls have seen, each with the run it became, and the sources polled once.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_FIRSTS = "same_as IS NULL AND identity IS NOT NULL"


def _utc(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "polled_sources",
        sa.Column("recipe", sa.String(64), primary_key=True),
        sa.Column("source", sa.String(64), primary_key=True),
        _utc("first_polled_at", nullable=False),
    )
    op.create_table(
        "polled_items",
        sa.Column("recipe", sa.String(64), primary_key=True),
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("item_id", sa.String(500), primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("same_as", sa.String(500), nullable=True),
        sa.Column("identity", sa.String(64), nullable=True),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("link", sa.Text(), nullable=True),
        _utc("published_at"),
        sa.Column("text", sa.Text(), nullable=False),
        _utc("seen_at", nullable=False),
    )
    op.create_index(
        "ix_polled_items_identity",
        "polled_items",
        ["recipe", "source", "identity"],
        unique=True,
        sqlite_where=sa.text(_FIRSTS),
        postgresql_where=sa.text(_FIRSTS),
    )
    op.create_index("ix_polled_items_run", "polled_items", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_polled_items_run", table_name="polled_items")
    op.drop_index("ix_polled_items_identity", table_name="polled_items")
    op.drop_table("polled_items")
    op.drop_table("polled_sources")
