"""Identities and keys (docs/design.md §2) as pure functions: the same inputs, the same key.

Every key is built from the *scheduled* slot, never from `now()`, so a catch-up run, a
retry and a second replica compute the same key. Keys stay readable in a SQL shell.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

WALL_FORMAT = "%Y-%m-%dT%H:%M"
SECOND_PASS_SUFFIX = "~2"
# A Message Batches `custom_id`: the API's own rule (docs/design.md §21).
CUSTOM_ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
CUSTOM_ID_MAX_LENGTH = 64
CUSTOM_ID_HASH_LENGTH = 24  # hex digits: 96 bits of SHA-256, never two keys alike in practice
_NOT_IN_CUSTOM_ID = re.compile(r"[^A-Za-z0-9_-]+")
# AT Protocol record keys for posts are TIDs: 64 bits (top bit 0), 53 of microseconds since
# the epoch then a 10-bit clock id, written in this base-32 alphabet, 13 characters.
TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
TID_LENGTH = 13
TID_CLOCK_BITS = 10
TID_JITTER_BITS = 20  # low bits of the time taken from the key: ~1.05 s after the slot
HEADER_KEY_MAX = 128  # an effect key longer than this travels as a hash in HTTP headers
HEADER_KEY_PREFIX = "galley-"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def run_id(recipe: str, slot_wall: datetime, occurrence: int = 1) -> str:
    """`weekly-update@2026-10-20T09:00`: recipe and nominal local wall time, no offset.

    The second pass of a repeated fall-back hour exists only under `dst_repeat = both`,
    and only then gets the `~2` suffix; otherwise the repeated hour is one run.
    """
    if slot_wall.tzinfo is not None:
        raise ValueError("slot_wall must be naive local wall time")
    suffix = SECOND_PASS_SUFFIX if occurrence == 2 else ""
    return f"{recipe}@{slot_wall.strftime(WALL_FORMAT)}{suffix}"


def attempt_id(run: str, number: int) -> str:
    return f"{run}#{number}"


def draft_key(platform: str, run: str, version: int) -> str:
    return f"{platform}|{run}|v{version}"


def run_of_draft_key(key: str) -> str:
    """The run id inside a draft key (`platform|run|vN`)."""
    return key.split("|")[1]


def batch_custom_id(draft: str) -> str:
    """The draft key as a Message Batches `custom_id`: within `[A-Za-z0-9_-]`, at most 64
    characters. A readable prefix (recipe, compact slot, version: what a person looks for
    in the Console) and a hash of the whole key, which alone tells keys apart: the prefix
    is cut to fit and drops the platform, so two keys may share it. Log the plain key
    beside it; the hash cannot be read back."""
    raw = draft.encode("utf-8", "surrogatepass")  # total: any str has one id
    digest = hashlib.sha256(raw).hexdigest()[:CUSTOM_ID_HASH_LENGTH]
    room = CUSTOM_ID_MAX_LENGTH - CUSTOM_ID_HASH_LENGTH - 1
    return f"{_readable_prefix(draft, room)}_{digest}"


def _readable_prefix(draft: str, room: int) -> str:
    """`weekly-update_20261020T0900_v3` for `linkedin|weekly-update@2026-10-20T09:00|v3`,
    the recipe cut first so slot and version stay; any other text made to fit."""
    parts = draft.split("|")
    if len(parts) == 3 and "@" in parts[1]:
        recipe, _, wall = parts[1].partition("@")
        slot = wall.replace("-", "").replace(":", "").replace(SECOND_PASS_SUFFIX, "-2")
        tail = _NOT_IN_CUSTOM_ID.sub("-", f"_{slot}_{parts[2]}")
        recipe = _NOT_IN_CUSTOM_ID.sub("-", recipe)[: max(0, room - len(tail))]
        prefix = f"{recipe}{tail}"
    else:
        prefix = _NOT_IN_CUSTOM_ID.sub("-", draft)
    return prefix[:room] or "draft"


def review_effect_key(draft: str) -> str:
    return f"{draft}|review"


def review_update_key(draft: str, state: str, revision: int, approvals: int = 0) -> str:
    """A review message rewritten to show its draft's state and revision; while the draft
    waits, also how many approvals it has (docs/design.md §22), so each step is shown."""
    tail = f":approvals-{approvals}" if approvals else ""
    return f"{review_effect_key(draft)}-update:{state}:{revision}{tail}"


def redraft_key(draft: str, revision: int) -> str:
    """`<draft key>|redraft:<revision>`: one reviewer's redraft of one revision, claimed
    once however often the request is delivered (docs/design.md §22)."""
    return f"{draft}|redraft:{revision}"


PUBLISH_MARK = "|publish:"


def publish_effect_key(draft: str, target: str) -> str:
    return f"{draft}{PUBLISH_MARK}{target}"


def target_of_publish_key(key: str) -> str:
    """The target id inside a publish effect key (`<draft>|publish:<target>`)."""
    return key.rpartition(PUBLISH_MARK)[2]


def parse_run_id(run: str) -> tuple[str, datetime, int]:
    """The inverse of `run_id`: (recipe, wall time, occurrence)."""
    recipe, _, wall = run.partition("@")
    occurrence = 2 if wall.endswith(SECOND_PASS_SUFFIX) else 1
    wall = wall.removesuffix(SECOND_PASS_SUFFIX)
    return recipe, datetime.strptime(wall, WALL_FORMAT), occurrence


def payload_hash(payload: Any) -> str:
    """SHA-256 of the canonical JSON form: key order and whitespace do not matter."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def text_hash(text: str) -> str:
    """Short hash of one revision of a draft's text: what an approval binds to."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def bluesky_record_key(effect_key: str) -> str:
    """The TID a post is created under: the same effect key always names the same record,
    so a second create of one publication fails instead of posting twice (DESIGN.md §10).

    Its time is the slot named in the key's run id, its wall time read as UTC (a look-up
    has only the key, and a record key needs no zone), plus up to ~1 s from the key's
    hash so two keys of one slot differ; its clock id is the key's hash too: 30 bits that
    tell keys apart. ValueError for a key without a run id in it.
    """
    try:
        _, wall, _ = parse_run_id(run_of_draft_key(effect_key))
    except (IndexError, ValueError):
        raise ValueError(f"not an effect key with a run id: {effect_key!r}") from None
    digest = int.from_bytes(hashlib.sha256(effect_key.encode("utf-8")).digest()[:8], "big")
    clock = digest & ((1 << TID_CLOCK_BITS) - 1)
    jitter = (digest >> TID_CLOCK_BITS) & ((1 << TID_JITTER_BITS) - 1)
    delta = wall.replace(tzinfo=UTC) - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds + jitter
    if not 0 <= micros < 1 << 53:
        raise ValueError(f"slot {wall.isoformat()} is outside the TID time range")
    value = (micros << TID_CLOCK_BITS) | clock
    chars = []
    for _ in range(TID_LENGTH):
        chars.append(TID_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def tid_time(tid: str) -> datetime:
    """The instant a TID's time part names (to microseconds)."""
    value = 0
    for char in tid:
        value = value * 32 + TID_ALPHABET.index(char)
    micros = value >> TID_CLOCK_BITS
    return datetime.fromtimestamp(micros // 1_000_000, UTC).replace(microsecond=micros % 1_000_000)


def header_key(effect_key: str) -> str:
    """An effect key as an `Idempotency-Key` header value: itself when short and plain
    ASCII, else `galley-` and a SHA-256 prefix (the plain key is logged beside it)."""
    if len(effect_key) <= HEADER_KEY_MAX and effect_key.isascii() and effect_key.isprintable():
        return effect_key
    return HEADER_KEY_PREFIX + hashlib.sha256(effect_key.encode("utf-8")).hexdigest()[:40]
