"""The history of a draft's text: every revision the model or people wrote, kept.

`keep_revisions` runs inside the edit's own transaction, just before the draft row
takes the new text, so a revision is kept exactly when it is written. It never
changes the draft row itself.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, select

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


def renumber_revision(session: Session, draft: DraftRow, *, at: datetime) -> None:
    """The same text under the next revision number (sent back for review: Unapprove, a
    stale approval), so buttons on the old message stop counting. Who wrote the text is
    kept with it: an editor barred from approving their own text stays barred whatever
    bumps its number (`editor_may_approve`, docs/design.md §22)."""
    author = text_author(session, draft)
    written = {draft.revision: draft.ready_at or at, draft.revision + 1: at}
    for revision, written_at in written.items():  # the current one first, if never kept
        insert_ignore(
            session,
            DraftRevisionRow,
            draft_key=draft.key,
            revision=revision,
            text=draft.text or "",
            text_hash=draft.text_hash or text_hash(draft.text or ""),
            written_by=author,
            written_at=written_at,
        )
    draft.revision += 1


def text_author(session: Session, draft: DraftRow) -> str:
    """Who wrote the draft's current text: its revision's row, else the newest kept
    revision with the same text (a number bumped before authors were carried), else the
    model."""
    current = session.get(DraftRevisionRow, (draft.key, draft.revision))
    if current is not None:
        return current.written_by
    same_text = session.exec(
        select(DraftRevisionRow.written_by)
        .where(
            col(DraftRevisionRow.draft_key) == draft.key,
            col(DraftRevisionRow.text_hash) == (draft.text_hash or text_hash(draft.text or "")),
        )
        .order_by(col(DraftRevisionRow.revision).desc())
        .limit(1)
    ).first()
    return same_text or model_author(draft.model)
