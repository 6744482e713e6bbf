"""The `file` reader: files beside the config, by glob (docs/design.md §26).

One item per file: its path relative to the config's folder is its id, its mtime its
date. Never reads outside the config's folder, even through a symlink.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from core.sources.items import ReadContext, SourceItem, SourceReadError
from core.sources.specs import FileSource

MAX_FILE_BYTES = 1_000_000  # a file's text beyond this is never shown to the model anyway


def read_files(spec: FileSource, context: ReadContext) -> list[SourceItem]:
    """Every regular file matching `spec.path` under the config's folder, by path."""
    root = context.config_dir.resolve()
    items = []
    for path in sorted(root.glob(spec.path)):
        if not path.is_file() or not path.resolve().is_relative_to(root):
            continue
        items.append(_file_item(spec.label, root, path))
    return items


def _file_item(source: str, root: Path, path: Path) -> SourceItem:
    try:
        with path.open("rb") as fh:
            text = fh.read(MAX_FILE_BYTES).decode("utf-8", errors="replace")
        modified = path.stat().st_mtime
    except OSError as exc:
        raise SourceReadError(
            source, f"cannot read {path.name}: {exc.strerror}", retryable=False
        ) from exc
    return SourceItem(
        source=source,
        item_id=path.relative_to(root).as_posix(),
        title=first_heading(text) or path.name,
        link=None,
        published_at=datetime.fromtimestamp(modified, tz=UTC),
        text=text,
    )


def first_heading(text: str) -> str | None:
    """A Markdown file's first ATX heading (`# Title`, up to `######`), without its marks."""
    for line in text.splitlines():
        marks, _, title = line.strip().partition(" ")
        if 1 <= len(marks) <= 6 and marks == "#" * len(marks) and title.strip("# \t"):
            return title.strip().rstrip("#").strip()
    return None
