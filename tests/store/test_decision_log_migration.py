"""Migration 0022 on both backends: a decision log written before it kept people's acts
only (docs/design.md §35) once upgraded: an alt text the model proposed, logged then as
an `edit` by `model:<name>`, stays in the history and leaves the log; a person's stays."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import command

from core.models import EventRow
from core.store.engine import Store

EVENTS = EventRow.__table__  # type: ignore[attr-defined]
AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def migrate(store: Store, to: str) -> None:
    config = store._alembic_config()
    with store.engine.begin() as connection:
        config.attributes["connection"] = connection
        if to == "head":
            command.upgrade(config, to)
        else:
            command.downgrade(config, to)


def test_upgrading_takes_the_models_edits_out_of_the_decision_log_and_keeps_peoples(
    store: Store,
) -> None:
    migrate(store, "0021")
    edit = {"subject": "draft", "subject_id": "k", "run_id": "r", "at": AT}
    edit |= {"from_state": "ready", "to_state": "ready", "decision": "edit"}
    with store.engine.begin() as connection:
        connection.execute(
            sa.insert(EVENTS),
            [
                edit | {"actor": "U0ANA", "revision": 2, "reason": "edited: revision 2"},
                edit | {"actor": "model:claude-x", "revision": 3, "reason": "edited: revision 3"},
            ],
        )

    migrate(store, "head")

    with store.engine.connect() as connection:
        rows = connection.execute(
            sa.select(EVENTS.c.actor, EVENTS.c.decision, EVENTS.c.reason).order_by(EVENTS.c.id)
        ).all()
    assert [tuple(row) for row in rows] == [
        ("U0ANA", "edit", "edited: revision 2"),
        ("model:claude-x", None, "edited: revision 3"),
    ]
