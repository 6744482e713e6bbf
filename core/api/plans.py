"""A plan imported (docs/design.md §37): `galley import plan.csv`, columns `publish_at,
recipe, text` and optional `id`, `image` (a file beside the plan), `alt`.

Every row is checked before any is added: a bad row is one line with its line number
(unknown recipe, bad time, text over a target's limit, an image missing or no image, an
id the file gives twice), and nothing is added while any row is bad, unless `skip_bad`.
Each row is a person's post at review, keyed by its `id` or the hash of its content, so
the same file imported twice adds nothing the second time. Reads are bounded: the plan's
bytes, and each image's bytes and pixels (core/images).
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.api.posts import PostDraft, plan_post
from core.errors import GalleyError, ImageRefused
from core.images.limits import MAX_IMAGE_FILE, size_in_words
from core.policies import ImageSource
from core.post_body import ImageRef
from core.review.person_posts import PlannedPost, Written, write_posts

if TYPE_CHECKING:
    from core.api.services import Services
    from core.images.shaping import Shaped

REQUIRED = ("publish_at", "recipe", "text")
OPTIONAL = ("id", "image", "alt")
MAX_PLAN_BYTES = 64 * 1024 * 1024  # a plan of 100,000 long posts fits well within this


class PlanUnreadable(GalleyError):
    """The plan file cannot be read as a plan at all (missing, too big, no header)."""


@dataclass(frozen=True)
class BadRow:
    line: int
    reason: str

    def describe(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass(frozen=True)
class _Good:
    post: PlannedPost
    image: tuple[Shaped, str] | None = None  # shaped bytes and the file's name


@dataclass(frozen=True)
class PlanImport:
    """What an import came to: the rows refused (with their lines), and what was added."""

    bad: tuple[BadRow, ...]
    written: Written = field(default_factory=Written)
    refused: bool = False  # nothing added: a row was bad and skip_bad was not asked

    def describe(self) -> list[str]:
        lines = [row.describe() for row in self.bad]
        if self.refused:
            return [*lines, f"nothing added: {len(self.bad)} bad rows (--skip-bad adds the rest)"]
        skipped = f", {len(self.bad)} bad rows skipped" if self.bad else ""
        return [*lines, f"{self.written.describe()}{skipped}"]

    def to_json(self) -> dict[str, Any]:
        return {
            "bad": [{"line": row.line, "reason": row.reason} for row in self.bad],
            "refused": self.refused,
            **self.written.to_json(),
        }


def import_plan(services: Services, path: Path, *, actor: str, skip_bad: bool) -> PlanImport:
    """Check every row of the plan at `path`, then add the good ones in one transaction
    (none while a row is bad, unless `skip_bad`)."""
    now = services.clock.now()
    good: list[_Good] = []
    bad: list[BadRow] = []
    seen: dict[str, int] = {}
    for line, row in _rows(path):
        checked = _check_row(services, path.parent, row, now)
        if isinstance(checked, str):
            bad.append(BadRow(line, checked))
            continue
        first = seen.setdefault(checked.post.run_id, line)
        if first != line:
            bad.append(BadRow(line, f"the same post as line {first} (id or content)"))
            continue
        good.append(checked)
    if bad and not skip_bad:
        return PlanImport(tuple(bad), refused=True)
    for kept in good:
        if kept.image is not None:
            shaped, name = kept.image
            services.images.keep(shaped, name, ImageSource.PLAN_FILE)
    posts = [kept.post for kept in good]
    written = write_posts(services.store, services.config, posts, actor=actor, now=now)
    return PlanImport(tuple(bad), written)


def _rows(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """Each row with the line it starts on; the header checked first."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise PlanUnreadable(f"{path}: {exc.strerror or exc}") from None
    if len(data) > MAX_PLAN_BYTES:
        raise PlanUnreadable(f"{path} is over {size_in_words(MAX_PLAN_BYTES)}: split it")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PlanUnreadable(f"{path} is not UTF-8 text (byte {exc.start})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [name.strip() for name in reader.fieldnames or []]
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        raise PlanUnreadable(f"{path}: the header has no {', '.join(missing)} column")
    reader.fieldnames = header
    start = reader.line_num + 1
    for row in reader:
        yield start, {key: (value or "") for key, value in row.items() if key is not None}
        start = reader.line_num + 1


def _check_row(services: Services, folder: Path, row: dict[str, str], now: datetime) -> _Good | str:
    """One row as a post ready to add, or why not (its reasons in one line)."""
    recipe = services.config.recipes.get(row["recipe"].strip())
    image: tuple[Shaped, str] | None = None
    refs: tuple[ImageRef, ...] = ()
    problems: list[str] = []
    if row.get("image", "").strip() and recipe is not None:
        targets = [target.target for target in recipe.targets]
        found = _image(folder, row["image"].strip(), targets)
        if isinstance(found, str):
            problems.append(found)
        else:
            image = found
            digest = hashlib.sha256(found[0].data).hexdigest()  # as `ImageLibrary.keep`'s
            refs = (ImageRef(digest, found[1], row.get("alt", "").strip()),)
    draft = PostDraft(
        recipe=row["recipe"].strip(),
        text=row["text"],
        targets={},
        at=row["publish_at"].strip(),
        post_id=row.get("id", "").strip() or None,
        images=refs,
    )
    if not draft.at:
        problems.append("no publish_at")
    planned = plan_post(services.config, services.fits, draft, now)
    if isinstance(planned, list):
        problems = planned + problems
    if problems:
        return "; ".join(problems)
    assert isinstance(planned, PlannedPost)
    return _Good(planned, image)


def _image(folder: Path, name: str, targets: list[str]) -> tuple[Shaped, str] | str:
    """The image file beside the plan, read bounded and shaped for the recipe's targets;
    or why not. A name leading outside the plan's folder is refused, never read."""
    from core.images.library import shape_for

    base = folder.resolve()
    path = (base / name).resolve()
    if not path.is_relative_to(base):
        return f"image {name!r} is not beside the plan"
    try:
        with path.open("rb") as file:
            data = file.read(MAX_IMAGE_FILE + 1)
    except OSError:
        return f"image {name!r} is missing"
    if len(data) > MAX_IMAGE_FILE:
        return f"image {name!r} is over {size_in_words(MAX_IMAGE_FILE)}"
    try:
        return shape_for(data, targets), path.name
    except ImageRefused as refused:
        return f"image {name!r}: {refused}"
