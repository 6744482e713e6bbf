"""Tables people read: HTML for Jupyter, aligned text for a terminal, DataFrames for
analysis. Shared by every read model in `core/api/views.py`.

Every cell is escaped on its way into HTML: draft text is model output, untrusted, and
a draft containing `<script>` must show as text. pandas is imported only inside
`to_frame`, so the bot never loads it.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import asdict, fields, is_dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any, ClassVar, TypeVar

T = TypeVar("T")

SHOWN_ROWS = 50  # a notebook cell with 100,000 rows helps nobody: the frame has them all
TEXT_CELL = 60  # characters of one cell in a terminal table


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def html_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell_text(v))}</td>" for v in row) + "</tr>"
        for row in rows
    )
    caption = f"<caption>{html.escape(title)}</caption>" if title else ""
    return (
        f'<table class="galley">{caption}<thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def text_table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    width: int | None = None,
) -> str:
    """Aligned columns; a table wider than `width` (a terminal's) becomes one block of
    `column  value` lines per row instead, values wrapped whole, so nothing is cut."""
    rows = list(rows)
    cells = [[_clip(cell_text(v)) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    if width is not None and sum(widths) + 2 * (len(widths) - 1) > width:
        return _record_blocks(title, columns, rows, width)
    lines = [title] if title else []
    lines.append("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def fact_lines(facts: Iterable[tuple[str, Any]], width: int | None = None) -> str:
    """`label  value` lines, labels aligned; within `width` the values wrap under
    themselves rather than run off the edge."""
    facts = [(label, cell_text(value)) for label, value in facts]
    label_width = max((len(label) for label, _ in facts), default=0)
    value_width = None if width is None else max(20, width - label_width - 2)
    lines = []
    for label, value in facts:
        wrapped = _wrapped(value, value_width) if value_width else [value.replace("\n", " ")]
        lines.append(f"{label.ljust(label_width)}  {wrapped[0]}".rstrip())
        lines += [" " * (label_width + 2) + more for more in wrapped[1:]]
    return "\n".join(lines)


def _record_blocks(
    title: str | None, columns: Sequence[str], rows: list[Sequence[Any]], width: int
) -> str:
    blocks = [title] if title else []
    blocks += [fact_lines(zip(columns, row, strict=True), width) for row in rows]
    return "\n\n".join(blocks)


def _wrapped(text: str, width: int) -> list[str]:
    return textwrap.wrap(text.replace("\n", " "), width, break_on_hyphens=False) or [""]


def html_block(tag: str, text: str, **attributes: str) -> str:
    attrs = "".join(f' {k}="{html.escape(v)}"' for k, v in attributes.items())
    return f"<{tag}{attrs}>{html.escape(text)}</{tag}>"


def _clip(text: str) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= TEXT_CELL else text[: TEXT_CELL - 1] + "…"


def jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {k: jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


class Printable:
    """IPython shows `str(self)`, the text table, in a terminal and as Jupyter's plain
    text; `repr` stays the debugging one."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # IPython looks for `_repr_pretty_` in each class's own namespace, and takes a
        # dataclass's own `__repr__` before an inherited one.
        super().__init_subclass__(**kwargs)
        cls._repr_pretty_ = Printable._repr_pretty_  # type: ignore[method-assign]


class Rows(Printable, list[T]):
    """A list of read-model rows (dataclasses) that renders itself.

    Subclasses name a `title` and a `row_type`; the columns are its fields unless
    `columns` says otherwise. Still a list, so callers that iterate keep working.
    """

    title: ClassVar[str] = ""
    row_type: ClassVar[type[Any] | None] = None  # a dataclass: its fields are the columns
    columns: ClassVar[tuple[str, ...]] = ()  # or a chosen few of them
    # read only where some row has one (an item run's item among slot runs)
    sparse_columns: ClassVar[tuple[str, ...]] = ()

    def field_names(self) -> tuple[str, ...]:
        """Every field: what JSON and DataFrames carry."""
        if self.row_type is not None and is_dataclass(self.row_type):
            return tuple(f.name for f in fields(self.row_type))
        return self.columns

    def column_names(self) -> tuple[str, ...]:
        """The fields a person reads in a table: a sparse one only if some row has it."""
        names = self.columns or self.field_names()
        empty = {n for n in self.sparse_columns if all(getattr(r, n) is None for r in self)}
        return tuple(name for name in names if name not in empty)

    def records(
        self, names: tuple[str, ...] | None = None, limit: int | None = None
    ) -> list[tuple[Any, ...]]:
        names = names or self.field_names()
        shown = self if limit is None else self[:limit]
        if len(names) == 1:
            return [(getattr(item, names[0]),) for item in shown]
        return list(map(attrgetter(*names), shown))  # C-level: 100,000 rows in ~0.05 s

    def to_json(self) -> list[dict[str, Any]]:
        return [jsonable(item) for item in self]

    def to_frame(self) -> Any:
        """A `pandas.DataFrame`, one row per item (needs the `notebook` extra)."""
        import pandas as pd  # the notebook extra; the bot never gets here

        names = self.field_names()
        return pd.DataFrame.from_records(self.records(names), columns=list(names))

    def _caption(self) -> str:
        more = len(self) - SHOWN_ROWS
        count = f"{len(self)} rows" + (f", first {SHOWN_ROWS} shown" if more > 0 else "")
        return f"{self.title} ({count})" if self.title else count

    def _repr_html_(self) -> str:
        names = self.column_names()
        return html_table(self._caption(), names, self.records(names, SHOWN_ROWS))

    def __str__(self) -> str:
        return self.rendered()

    def rendered(self, width: int | None = None) -> str:
        """The text table; `width` a terminal's columns, to fit it."""
        names = self.column_names()
        return text_table(self._caption(), names, self.records(names, SHOWN_ROWS), width)
