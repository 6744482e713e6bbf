"""Pydantic's validation errors as a person would say them (docs/design.md §15): the
field named as the file spells it, what was written, and what was wanted. Never
pydantic's own words, and never a problem found here: the config module finds them.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from core.policies import SourceKind
from core.setup.publish_targets import TARGETS
from core.sources.specs import (
    CHANNEL_PATTERN,
    HTTP_URL_PATTERN,
    REPO_PATTERN,
    SOURCE_MODELS,
)

# The patterns of the file's own keys, here beside their words (the sources' are in
# core/sources/specs.py).
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")
DIGEST_AT_PATTERN = r"^([01]\d|2[0-3]):[0-5]\d$"
REPORT_AT_PATTERN = r"^(mon|tue|wed|thu|fri|sat|sun) ([01]\d|2[0-3]):[0-5]\d$"


def keys_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the table holding an unknown key may have: a publish target's (pydantic's
    loc names its tag) or the model's own."""
    if loc[:1] == ("publish",):
        tag = next((part for part in loc[1:] if isinstance(part, str) and part in TARGETS), None)
        return list(TARGETS[tag].model_fields) if tag else ["to"]
    if loc[:1] == ("sources",) and len(loc) > 2 and loc[2] in SOURCE_MODELS:
        return list(SOURCE_MODELS[SourceKind(loc[2])].model_fields)
    return [str(f.validation_alias or name) for name, f in model.model_fields.items()]


def unknown_key(key: str, valid: Iterable[str]) -> str:
    """An unknown key, with the likeliest one meant and every key the table takes."""
    keys = sorted(valid)
    close = difflib.get_close_matches(key, keys, n=1)
    meant = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown key{meant} (valid keys: {', '.join(keys)})"


def publish_loc(loc: tuple[int | str, ...], single: bool) -> tuple[int | str, ...]:
    """`publish.url`, or `publish[2].url` in a list: pydantic's loc also names the list index
    (0 for a single table) and the union's tag, which say nothing to the reader."""
    if len(loc) < 2 or not isinstance(loc[1], int):
        return loc
    head = "publish" if single else f"publish[{loc[1] + 1}]"
    return (head, *loc[3:])


def source_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """`sources[2].url`, `sources[2].items[1]`: counted from 1 as people count, without
    the kind pydantic's loc names after the index."""
    if len(loc) < 2 or not isinstance(loc[1], int):
        return loc
    rest = loc[3:] if len(loc) > 2 and loc[2] in SOURCE_MODELS else loc[2:]
    parts: list[int | str] = [f"sources[{loc[1] + 1}]"]
    for part in rest:
        if isinstance(part, int) and parts:
            parts[-1] = f"{parts[-1]}[{part + 1}]"
        else:
            parts.append(part)
    return tuple(parts)


def field_name(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc if not str(part).startswith("function-")) or "?"


# What a value of a pattern-checked field must look like, in words.
PATTERN_WORDS = {
    NAME_PATTERN.pattern: "use lower-case letters, digits and '-', starting with a letter or digit",
    r"^[^|]+$": "must not contain '|'",
    DIGEST_AT_PATTERN: 'want a time of day as HH:MM on a 24-hour clock, like "09:00"',
    REPORT_AT_PATTERN: 'want a weekday and a time of day, like "mon 09:00"',
    r"^https?://": "want a URL that starts with http:// or https://",
    HTTP_URL_PATTERN: "want a URL that starts with http:// or https://",
    REPO_PATTERN: 'want a repository as owner/name, like "acme/widget"',
    CHANNEL_PATTERN: 'want a channel ID like "C0SHIPPED" (Channel details in Slack), not its name',
    r"^[^\s|][^|]*$": "must not start with a space or contain '|'",
}
# What a tagged union's missing tag chooses.
TAG_WORDS = {"to": "where to publish", "kind": "what it reads: " + ", ".join(SourceKind)}
TYPE_WORDS = {
    "int_type": "want a whole number, without quotes",
    "bool_type": "want true or false, without quotes",
    "string_type": "want text in quotes",
    "list_type": "want a list in brackets",
    "dict_type": "want a table",
    "model_type": "want a table",
    "time_delta_type": 'want a duration in quotes, like "90m", "48h" or "7d"',
    "float_type": "want a number",
}


def message(error: Any) -> str:
    """Pydantic's error as a person would say it, with what was written."""
    kind, ctx = error["type"], error.get("ctx") or {}
    got = f", got {_written(error.get('input'))}" if "input" in error else ""
    if kind == "missing":
        return "missing required field"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind in TYPE_WORDS:
        return TYPE_WORDS[kind] + got
    if kind == "string_pattern_mismatch":
        return PATTERN_WORDS.get(str(ctx.get("pattern")), "is not in the expected form") + got
    if kind in ("enum", "literal_error"):
        return f"want {ctx.get('expected', 'another value')}{got}"
    if kind == "union_tag_invalid":
        key, tag = str(ctx.get("discriminator", "to")).strip("'"), _written(ctx.get("tag"))
        return f"{key}: want one of {_tags(str(ctx.get('expected_tags')))}, got {tag}"
    if kind == "union_tag_not_found":
        key = str(ctx.get("discriminator", "to")).strip("'")
        return f"missing {key} ({TAG_WORDS.get(key, 'which kind')})"
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        return (
            f"must be at least {bound}{got}"
            if kind.endswith("equal")
            else f"must be over {bound}{got}"
        )
    if kind in ("less_than_equal", "less_than"):
        bound = ctx.get("le", ctx.get("lt"))
        return (
            f"must be at most {bound}{got}"
            if kind.endswith("equal")
            else f"must be under {bound}{got}"
        )
    if kind == "string_too_short":
        return (
            "must not be empty"
            if ctx.get("min_length") == 1
            else f"want at least {ctx['min_length']} characters"
        )
    if kind == "string_too_long":
        return f"want at most {ctx.get('max_length')} characters"
    return str(error["msg"]).removeprefix("Value error, ")


def _tags(expected: str) -> str:
    """Pydantic's list of tags, an enum's members as the words written in the file."""
    return re.sub(r"<\w+\.\w+: '([^']*)'>", r'"\1"', expected)


def _written(value: Any) -> str:
    """A value as the TOML file spells it: strings in quotes, booleans in lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return shown if len(shown) <= 60 else shown[:57] + "..."
