"""The history of a draft's text: every revision the model or people wrote, kept.

`keep_revisions` runs inside the edit's own transaction, just before the draft row
takes the new text, so a revision is kept exactly when it is written. It never
changes the draft row itself.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from core.identity import text_hash
from core.models import DraftRevisionRow, DraftRow
from core.store.engine import insert_ignore

MODEL_AUTHOR = "model"


def keep_revisions(
    session: Session, draft: DraftRow, *, new_text: str, editor: str, at: datetime
) -> None:
    """Record the draft's current revision (once: the model's, on a first edit) and
    the revision this edit writes."""
    insert_ignore(
        session,
        DraftRevisionRow,
        draft_key=draft.key,
        revision=draft.revision,
        text=draft.text or "",
        text_hash=draft.text_hash or text_hash(draft.text or ""),
        written_by=model_author(draft.model) if draft.revision <= 1 else editor,
        written_at=draft.ready_at or at,
    )
    insert_ignore(
        session,
        DraftRevisionRow,
        draft_key=draft.key,
        revision=draft.revision + 1,
        text=new_text,
        text_hash=text_hash(new_text),
        written_by=editor,
        written_at=at,
    )


def model_author(model: str | None) -> str:
    return f"{MODEL_AUTHOR}:{model}" if model else MODEL_AUTHOR
