"""Images a source item brings (issue 39, docs/design.md §32): the image URL and caption a
poll saw on each item, and on each snapshot item the hash of the bytes kept for it when
its run's snapshot was taken, or a one-line note why none were.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def _seen() -> list[sa.Column[object]]:
    return [
        sa.Column("image_url", sa.Text(), nullable=True),
        sa.Column("image_caption", sa.Text(), nullable=True),
    ]


def upgrade() -> None:
    with op.batch_alter_table("polled_items") as batch_op:
        for column in _seen():
            batch_op.add_column(column)
    with op.batch_alter_table("snapshot_items") as batch_op:
        for column in _seen():
            batch_op.add_column(column)
        batch_op.add_column(sa.Column("image_sha256", sa.String(64), nullable=True))
        batch_op.add_column(sa.Column("image_note", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("snapshot_items") as batch_op:
        for name in ("image_note", "image_sha256", "image_caption", "image_url"):
            batch_op.drop_column(name)
    with op.batch_alter_table("polled_items") as batch_op:
        for name in ("image_caption", "image_url"):
            batch_op.drop_column(name)
