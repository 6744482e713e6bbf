"""Items and the decision log tell the truth (docs/design.md §35, §29): an items
recipe's latest poll keeps the latest entry it did not draft as a re-issue of a known
item (same link and title under a new id), so `galley status` and Home say so; and the
decision log keeps people's acts only, so an alt text the model proposed, once logged as
an `edit` by `model:<name>`, is history, no decision.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("item_polls") as batch_op:
        batch_op.add_column(sa.Column("reissued_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("reissued", sa.Text(), nullable=True))
    op.execute(
        "UPDATE events SET decision = NULL, revision = NULL"
        " WHERE decision IS NOT NULL AND (actor = 'model' OR actor LIKE 'model:%')"
    )


def downgrade() -> None:
    with op.batch_alter_table("item_polls") as batch_op:
        for name in ("reissued", "reissued_at"):
            batch_op.drop_column(name)
