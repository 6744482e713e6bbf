"""Alembic environment: runs on the connection `Store.upgrade` hands over."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context
from sqlmodel import SQLModel

import core.models  # noqa: F401  (registers the tables on the metadata)

MIGRATION_LOCK_ID = 0x6A11E7  # PostgreSQL advisory lock: one migrator at a time

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `galley db upgrade`")

context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID})
    context.run_migrations()
