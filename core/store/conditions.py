"""Conditions written once, over whichever columns read them: the models' (through the
ORM) or the Core tables of `galley status` (core/api/status_read.py), so the two reads
cannot count differently. No ORM import here: `galley status` loads this module."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from core.drafting_policies import Drafting
from core.states import DraftState


def waiting_for_review(state: Any) -> sa.ColumnElement[bool]:
    """A draft in the review queue (`drafts.state`): the count backpressure judges by."""
    return sa.and_(state == DraftState.READY)


def unfinished_batch_entry_of(mode: Any, finished_at: Any) -> sa.ColumnElement[bool]:
    """An attempt waiting in (or for) a Message Batch (`attempts.mode`, `finished_at`),
    answered by the partial index ix_attempts_waiting."""
    return sa.and_(mode == Drafting.BATCH, finished_at.is_(None))
