"""Indexes that make every periodic pass cost the work to do, not the history.

Partial indexes hold only the rows a pass looks for (drafts waiting for review or being
written, receipts not yet settled, review messages behind their draft); plain ones serve
paging and recent-window reads. `drafts.shown_state` / `shown_revision` record what the
review message in Slack shows, so the outbox finds the messages to update by index.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

READY = "state = 'ready'"
CLAIMED = "state = 'claimed'"
MESSAGE_BEHIND = "shown_state <> state OR shown_revision <> revision"
UNSETTLED = "state = 'in_flight' OR state = 'uncertain'"
IN_BACKPRESSURE = "backpressure_since IS NOT NULL"
ALERT_POSTED = "step = 'alert' AND state = 'succeeded'"
UPDATE_NEEDED = "('approved', 'rejected', 'expired', 'superseded')"


def _partial(name: str, table: str, columns: list[str], where: str) -> None:
    op.create_index(
        name, table, columns, sqlite_where=sa.text(where), postgresql_where=sa.text(where)
    )


def upgrade() -> None:
    with op.batch_alter_table("drafts") as batch_op:
        batch_op.add_column(sa.Column("shown_state", sa.String(32), nullable=True))
        batch_op.add_column(sa.Column("shown_revision", sa.Integer(), nullable=True))
    _backfill_shown()
    op.drop_index("ix_runs_slot_at", table_name="runs")  # 0006's; ix_runs_slot covers it
    op.create_index("ix_runs_slot", "runs", ["slot_at", "id"])
    op.create_index("ix_runs_state_slot", "runs", ["state", "slot_at", "id"])
    op.create_index("ix_runs_recipe_slot", "runs", ["recipe", "slot_at"])
    op.create_index("ix_runs_state_updated", "runs", ["state", "updated_at"])
    op.create_index("ix_drafts_state_updated", "drafts", ["state", "updated_at", "recipe"])
    op.create_index("ix_attempts_recipe_started", "attempts", ["recipe", "started_at"])
    _partial("ix_drafts_ready", "drafts", ["ready_at"], READY)
    _partial("ix_drafts_claimed", "drafts", ["lease_until"], CLAIMED)
    _partial("ix_drafts_message_behind", "drafts", ["key"], MESSAGE_BEHIND)
    _partial("ix_effects_unsettled", "effects", ["step"], UNSETTLED)
    _partial("ix_recipes_backpressure", "recipes", ["name"], IN_BACKPRESSURE)
    _partial("ix_effects_alerts_posted", "effects", ["created_at"], ALERT_POSTED)


def _backfill_shown() -> None:
    """A posted message shows its draft as it was last updated. Where the update for the
    draft's current state is on record, or none is due, it shows the draft as it is;
    otherwise it shows the draft as posted (`ready`, revision unknown: 0), so the outbox
    brings it up to date once."""
    posted = (
        "EXISTS (SELECT 1 FROM effects e WHERE e.key = drafts.key || '|review'"
        " AND e.state = 'succeeded')"
    )
    updated = (
        "EXISTS (SELECT 1 FROM effects e WHERE e.state = 'succeeded' AND e.key ="
        " drafts.key || '|review-update:' || drafts.state || ':' || drafts.revision)"
    )
    due = f"(state IN {UPDATE_NEEDED} OR (state = 'ready' AND revision > 1))"
    op.execute(
        "UPDATE drafts SET shown_state = state, shown_revision = revision"
        f" WHERE {posted} AND (NOT {due} OR {updated})"
    )
    op.execute(
        "UPDATE drafts SET shown_state = 'ready', shown_revision = 0"
        f" WHERE shown_state IS NULL AND {posted}"
    )


def downgrade() -> None:
    for name, table in [
        ("ix_recipes_backpressure", "recipes"),
        ("ix_effects_unsettled", "effects"),
        ("ix_effects_alerts_posted", "effects"),
        ("ix_drafts_message_behind", "drafts"),
        ("ix_drafts_claimed", "drafts"),
        ("ix_drafts_ready", "drafts"),
        ("ix_attempts_recipe_started", "attempts"),
        ("ix_drafts_state_updated", "drafts"),
        ("ix_runs_state_updated", "runs"),
        ("ix_runs_recipe_slot", "runs"),
        ("ix_runs_state_slot", "runs"),
        ("ix_runs_slot", "runs"),
    ]:
        op.drop_index(name, table_name=table)
    op.create_index("ix_runs_slot_at", "runs", ["slot_at"])
    with op.batch_alter_table("drafts") as batch_op:
        batch_op.drop_column("shown_revision")
        batch_op.drop_column("shown_state")
