"""The `file` reader and what `read_source` does for every kind: the window, newest
first, at most `max_items` (docs/design.md §26)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from core.sources import files
from core.sources.files import first_heading
from core.sources.items import SourceItem, SourceReadError, Window
from core.sources.reading import newest_first, read_source
from tests.sources.specs import SLOT, WEEK, context, source


def write(root: Path, name: str, text: str, modified: datetime) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (modified.timestamp(), modified.timestamp()))
    return path


def test_each_file_is_one_item_named_by_its_path_and_first_heading(tmp_path: Path) -> None:
    write(
        tmp_path,
        "notes/a.md",
        "Intro line\n## Shipped search\n\nIt is fast.\n",
        SLOT - timedelta(days=2),
    )
    write(tmp_path, "notes/b.md", "no heading here\n", SLOT - timedelta(days=1))

    items = read_source(source(kind="file", path="notes/*.md"), WEEK, context(tmp_path))

    assert [(item.item_id, item.title) for item in items] == [
        ("notes/b.md", "b.md"),
        ("notes/a.md", "Shipped search"),
    ]
    assert items[1].published_at == SLOT - timedelta(days=2)
    assert items[1].published_at.tzinfo is not None
    assert items[1].text == "Intro line\n## Shipped search\n\nIt is fast.\n"
    assert {item.source for item in items} == {"notes/*.md"}


def test_only_files_dated_in_the_window_are_read(tmp_path: Path) -> None:
    write(tmp_path, "old.md", "# Old", WEEK.start - timedelta(seconds=1))  # type: ignore[operator]
    write(tmp_path, "edge.md", "# Edge", SLOT)
    write(tmp_path, "later.md", "# Later", SLOT + timedelta(seconds=1))

    items = read_source(source(kind="file", path="*.md"), WEEK, context(tmp_path))

    assert [item.item_id for item in items] == ["edge.md"]


def test_a_first_slot_window_reads_everything_up_to_the_slot(tmp_path: Path) -> None:
    write(tmp_path, "ancient.md", "# Ancient", datetime(2001, 1, 1, tzinfo=SLOT.tzinfo))

    items = read_source(
        source(kind="file", path="*.md"), Window(start=None, end=SLOT), context(tmp_path)
    )

    assert [item.item_id for item in items] == ["ancient.md"]


def test_at_most_max_items_newest_first(tmp_path: Path) -> None:
    for day in range(1, 6):
        write(tmp_path, f"day{day}.md", f"# Day {day}", SLOT - timedelta(days=day))

    items = read_source(source(kind="file", path="*.md", max_items=2), WEEK, context(tmp_path))

    assert [item.item_id for item in items] == ["day1.md", "day2.md"]


def test_a_glob_matching_nothing_reads_no_items(tmp_path: Path) -> None:
    assert read_source(source(kind="file", path="missing/*.md"), WEEK, context(tmp_path)) == []


def test_folders_and_symlinks_out_of_the_config_folder_are_not_read(tmp_path: Path) -> None:
    config_dir = tmp_path / "config"
    outside = write(tmp_path, "secret.md", "# Secret", SLOT - timedelta(days=1))
    write(config_dir, "notes/kept.md", "# Kept", SLOT - timedelta(days=1))
    (config_dir / "notes" / "sub").mkdir()
    (config_dir / "notes" / "leak.md").symlink_to(outside)

    items = read_source(source(kind="file", path="notes/*"), WEEK, context(config_dir))

    assert [item.item_id for item in items] == ["notes/kept.md"]


def test_a_file_that_is_not_utf8_is_read_with_replacements(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes(b"caf\xe9 ouvert\n")
    os.utime(path, (SLOT.timestamp(), SLOT.timestamp()))

    [item] = read_source(source(kind="file", path="*.txt"), WEEK, context(tmp_path))

    assert item.text == "caf\ufffd ouvert\n"


def test_an_unreadable_file_fails_the_source_naming_it(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = write(tmp_path, "locked.md", "# Locked", SLOT - timedelta(days=1))
    path.chmod(0)

    with pytest.raises(SourceReadError) as raised:
        read_source(source(kind="file", path="*.md", name="notes"), WEEK, context(tmp_path))

    assert raised.value.source == "notes"
    assert "locked.md" in raised.value.answer
    assert raised.value.retryable is False


def test_undated_items_come_after_dated_ones_in_the_order_given() -> None:
    def item(item_id: str, published_at: datetime | None) -> SourceItem:
        return SourceItem(
            source="s",
            item_id=item_id,
            title=item_id,
            link=None,
            published_at=published_at,
            text="",
        )

    items = [
        item("u1", None),
        item("old", SLOT - timedelta(days=2)),
        item("u2", None),
        item("new", SLOT),
    ]

    assert [each.item_id for each in newest_first(items)] == ["new", "old", "u1", "u2"]


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("# Title\n", "Title"),
        ("text\n   ### Closed heading ###\n", "Closed heading"),
        ("#hashtag\n####### seven\n", None),
        ("#\n## \n## Second\n", "Second"),
    ],
)
def test_the_first_markdown_heading_is_the_title(text: str, title: str | None) -> None:
    assert first_heading(text) == title


def test_a_huge_file_is_read_only_up_to_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 10)
    write(tmp_path, "log.txt", "0123456789" * 100, SLOT - timedelta(days=1))

    [item] = read_source(source(kind="file", path="*.txt"), WEEK, context(tmp_path))

    assert item.text == "0123456789"
