"""Identities and keys (docs/design.md §2) as pure functions: the same inputs, the same key.

Every key is built from the *scheduled* slot, never from `now()`, so a catch-up run, a
retry and a second replica compute the same key. Keys stay readable in a SQL shell.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, date, datetime, timedelta
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
CLI_ACTOR = "cli"  # the actor of a person at the command line who named nobody (`--as`)


def run_id(recipe: str, slot_wall: datetime, occurrence: int = 1) -> str:
    """`weekly-update@2026-10-20T09:00`: recipe and nominal local wall time, no offset.

    The second pass of a repeated fall-back hour exists only under `dst_repeat = both`,
    and only then gets the `~2` suffix; otherwise the repeated hour is one run.
    """
    return f"{recipe}{RUN_MARK}{wall_text(slot_wall, occurrence)}"


def wall_text(slot_wall: datetime, occurrence: int = 1) -> str:
    """A slot's wall time as a run id and `runs.slot_wall` write it (`2026-10-20T09:00`,
    `~2` on a repeated hour's second pass)."""
    if slot_wall.tzinfo is not None:
        raise ValueError("slot_wall must be naive local wall time")
    suffix = SECOND_PASS_SUFFIX if occurrence == 2 else ""
    return f"{slot_wall.strftime(WALL_FORMAT)}{suffix}"


# An item run (docs/design.md §29): `release-notes@item:<item token>`. The token is the
# item's own key when it is short and plain; otherwise a readable cut of it, `=` and a hash
# of the whole key (`=` is never in a plain token, so the two forms cannot meet).
ITEM_MARK = "item:"
ITEM_TOKEN_MAX = 100
ITEM_HASH_LENGTH = 16  # hex digits: 64 bits of SHA-256 per recipe's items
_PLAIN_ITEM_TOKEN = re.compile(r"^[A-Za-z0-9._:/-]+$")  # no | # ~ @ = or spaces
_NOT_IN_ITEM_TOKEN = re.compile(r"[^A-Za-z0-9._:/-]+")
# Item runs name no slot, so a record key's time comes from the key (docs/design.md §29).
_ITEM_TID_BASE = datetime(2024, 1, 1, tzinfo=UTC)
_ITEM_TID_SPREAD_BITS = 40  # ~12.7 days of microseconds after the base


def item_token(item_key: str) -> str:
    """The part of an item run's id that names the item: readable, and hashed when long."""
    if len(item_key) <= ITEM_TOKEN_MAX and _PLAIN_ITEM_TOKEN.match(item_key):
        return item_key
    digest = hashlib.sha256(item_key.encode("utf-8", "surrogatepass")).hexdigest()
    readable = _NOT_IN_ITEM_TOKEN.sub("-", item_key)[: ITEM_TOKEN_MAX - ITEM_HASH_LENGTH - 1]
    return f"{readable}={digest[:ITEM_HASH_LENGTH]}"


def item_run_id(recipe: str, token: str) -> str:
    """`release-notes@item:release:1234`: one run per item of an items recipe."""
    return f"{recipe}{RUN_MARK}{ITEM_MARK}{token}"


def item_token_of_run(run: str) -> str | None:
    """The item token inside an item run's id; None for a slot's run."""
    _, _, rest = run.partition(RUN_MARK)
    return rest.removeprefix(ITEM_MARK) if rest.startswith(ITEM_MARK) else None


def item_run_range(recipe: str) -> tuple[str, str]:
    """Bounds (both exclusive) of a recipe's item runs, as `run_id_range`'s."""
    return f"{recipe}{RUN_MARK}{ITEM_MARK}", f"{recipe}{RUN_MARK}{ITEM_MARK}{RUN_ID_END}"


# A person's post (docs/design.md §37): `launch@post:<id>`. The id is the person's own
# (a plan's `id` column) made a token as an item's is, or a hash of the post's content, so
# the same post written or imported twice is one run.
POST_MARK = "post:"
POST_HASH_LENGTH = 16  # hex digits: 64 bits of SHA-256 per recipe's posts
ASAP_WALL = "asap"  # `runs.slot_wall` of a post given no time: published once approved


def post_run_id(recipe: str, post_id: str) -> str:
    """`launch@post:spring-sale`: one run per post a person wrote."""
    return f"{recipe}{RUN_MARK}{POST_MARK}{item_token(post_id)}"


def post_content_id(recipe: str, at: str, versions: dict[str, str], image: str, alt: str) -> str:
    """A post's id when its writer gave none: the hash of what it is (recipe, time, each
    target's text, image and alt text), so the same row imported twice names one run."""
    digest = payload_hash([recipe, at, versions, image, alt])
    return f"h-{digest[:POST_HASH_LENGTH]}"


def post_id_of_run(run: str) -> str | None:
    """The post's id inside a post run's id; None for any other run."""
    _, _, rest = run.partition(RUN_MARK)
    return rest.removeprefix(POST_MARK) if rest.startswith(POST_MARK) else None


def post_run_range(recipe: str) -> tuple[str, str]:
    """Bounds (both exclusive) of a recipe's post runs, as `run_id_range`'s."""
    return f"{recipe}{RUN_MARK}{POST_MARK}", f"{recipe}{RUN_MARK}{POST_MARK}{RUN_ID_END}"


def names_no_slot(run: str) -> bool:
    """An item's or a person's run: its id names no slot of the schedule."""
    return item_token_of_run(run) is not None or post_id_of_run(run) is not None


RUN_MARK = "@"  # between a run id's recipe and its slot's wall time
KEY_MARK = "|"  # between the parts of draft and effect keys
RUN_ID_END = "~"  # sorts after every wall time: `[recipe@, recipe@~)` holds a recipe's runs


def recipe_of_run(run: str) -> str:
    """The recipe inside a run id (`recipe@wall`)."""
    return run.partition(RUN_MARK)[0]


def slot_wall_of_run(run: str) -> str:
    """The wall time inside a run id as stored in `runs.slot_wall` (`2026-10-20T09:00`,
    `~2` kept on a repeated hour's second pass). ValueError for an item run or a person's
    post: its id names no slot (its row's `slot_wall` is the poll's, or the post's)."""
    if names_no_slot(run):
        raise ValueError(f"an item or post run names no slot: {run!r}")
    return run.partition(RUN_MARK)[2]


def is_run_id(text: str) -> bool:
    return RUN_MARK in text


def run_id_range(recipe: str) -> tuple[str, str]:
    """Bounds (both exclusive) of the run ids of one recipe: the primary key's order is the
    slots' order, so a recipe's latest run is one index probe."""
    return f"{recipe}{RUN_MARK}", f"{recipe}{RUN_MARK}{RUN_ID_END}"


def attempt_id(run: str, number: int) -> str:
    return f"{run}#{number}"


def draft_key(platform: str, run: str, version: int) -> str:
    return KEY_MARK.join((platform, run, f"v{version}"))


def run_of_draft_key(key: str) -> str:
    """The run id inside a draft key (`platform|run|vN`), or inside any key that starts
    with one (review, publish and redraft receipts)."""
    return key.split(KEY_MARK)[1]


def run_of_key(key: str) -> str | None:
    """The run a draft or effect key names, whatever kind it is: an alert's
    (`alert|<run>|…`), a review-message alert's (`alert|review-post|<draft key>`), a
    draft's or a receipt built on one (`<platform>|<run>|…`); None for a key that names no
    run (a backpressure notice, the digest)."""
    parts = key.split(KEY_MARK)
    if parts[0] in _NO_RUN_PREFIXES or len(parts) < 2:
        return None
    if parts[0] == ALERT_PREFIX and parts[1] in _DRAFT_ALERTS:
        parts = parts[2:]  # the draft key the alert is about
    return parts[1] if len(parts) > 1 and is_run_id(parts[1]) else None


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
    parts = draft.split(KEY_MARK)
    if len(parts) == 3 and is_run_id(parts[1]):
        recipe, _, wall = parts[1].partition(RUN_MARK)
        slot = wall.replace("-", "").replace(":", "").replace(SECOND_PASS_SUFFIX, "-2")
        tail = _NOT_IN_CUSTOM_ID.sub("-", f"_{slot}_{parts[2]}")
        recipe = _NOT_IN_CUSTOM_ID.sub("-", recipe)[: max(0, room - len(tail))]
        prefix = f"{recipe}{tail}"
    else:
        prefix = _NOT_IN_CUSTOM_ID.sub("-", draft)
    return prefix[:room] or "draft"


def review_effect_key(draft: str) -> str:
    return f"{draft}|review"


def review_update_key(
    draft: str, state: str, revision: int, approvals: int = 0, gone: int = 0, published: int = 0
) -> str:
    """A review message rewritten to show its draft's state and revision; while the draft
    waits, also how many approvals it has (docs/design.md §22), so each step is shown;
    approved and not yet published everywhere, how many targets have it (docs/design.md
    §24); once published, how many of its posts were found gone (docs/design.md §28)."""
    tail = f":approvals-{approvals}" if approvals else ""
    tail += f":published-{published}" if published else ""
    tail += f":gone-{gone}" if gone else ""
    return f"{review_effect_key(draft)}-update:{state}:{revision}{tail}"


ALERT_PREFIX = "alert"
SETTLED_SUFFIX = "|settled"
REMINDER_MARK = "|reminder:"


def alert_key(run: str, state: str, since: datetime) -> str:
    """`alert|<run id>|<state>|<since>`: one alert per episode of a run in a state."""
    return KEY_MARK.join((ALERT_PREFIX, run, state, since.isoformat()))


def reminder_key(alert: str, reminders: int) -> str:
    """The n-th reminder of an alert while its episode lasts."""
    return f"{alert}{REMINDER_MARK}{reminders}"


def is_reminder_key(key: str) -> bool:
    return REMINDER_MARK in key


def parse_alert_key(key: str) -> tuple[str, str]:
    """The inverse of `alert_key` (a reminder's too): the run, and the state alerted on."""
    _, run, state, *_ = key.split(KEY_MARK)
    return run, state


def alert_settled_key(alert: str) -> str:
    """The receipt of an alert rewritten to say how its run was settled."""
    return f"{alert}{SETTLED_SUFFIX}"


REVIEW_POST = "review-post"  # its review message may have been posted and cannot be found
REVIEW_GONE = "review-gone"  # its review message was deleted in Slack
POST_GONE = "post-gone"  # a publication read back was gone (`alert|post-gone|<receipt>`)
_DRAFT_ALERTS = (REVIEW_POST, REVIEW_GONE, POST_GONE)
REVIEW_POST_ALERT = f"{ALERT_PREFIX}{KEY_MARK}{REVIEW_POST}{KEY_MARK}"


def draft_alert_key(kind: str, draft: str) -> str:
    """An alert about a draft's review message (`alert|review-post|<draft key>`), told
    once per draft; `kind` is `REVIEW_POST` or `REVIEW_GONE`. `POST_GONE` names a
    publish receipt (`<draft>|publish:<target>`) instead: told once per post."""
    if kind not in _DRAFT_ALERTS:
        raise ValueError(f"not a draft alert: {kind!r}")
    return KEY_MARK.join((ALERT_PREFIX, kind, draft))


NOTICE_PREFIX = "backpressure"
DIGEST_PREFIX = "digest"
REPORT_PREFIX = "report"
POLL_ALERT_PREFIX = "poll-failing"
CREDENTIAL_CHECK_PREFIX = "credential-check"
CREDENTIAL_ALERT_PREFIX = "credential-failing"
EXPIRY_ALERT_PREFIX = "credential-expiry"
_NO_RUN_PREFIXES = (
    NOTICE_PREFIX,
    DIGEST_PREFIX,
    REPORT_PREFIX,
    POLL_ALERT_PREFIX,
    CREDENTIAL_CHECK_PREFIX,
    CREDENTIAL_ALERT_PREFIX,
    EXPIRY_ALERT_PREFIX,
)


def poll_alert_key(recipe: str, failing_since: datetime) -> str:
    """`poll-failing|<recipe>|<first failure>`: one alert per failing episode of an items
    recipe's polls (docs/design.md §29); `alert_settled_key` of it when it ends."""
    return KEY_MARK.join((POLL_ALERT_PREFIX, recipe, failing_since.isoformat()))


def credential_check_key(target: str, hour: datetime) -> str:
    """`credential-check|<target>|<hour>`: one target's credentials proved at most once per
    hour across replicas (docs/design.md §36); `hour` is the hour's start."""
    return KEY_MARK.join((CREDENTIAL_CHECK_PREFIX, target, hour.isoformat()))


def credential_alert_key(target: str, failed_at: datetime) -> str:
    """`credential-failing|<target>|<hour>`: one alert per failing episode of a target's
    credentials, named by the hour of the check that found it; `alert_settled_key` of it
    when a check passes again."""
    return KEY_MARK.join((CREDENTIAL_ALERT_PREFIX, target, failed_at.isoformat()))


def credential_alert_range(target: str) -> tuple[str, str]:
    """Every `credential_alert_key` of `target` (and their settled receipts) sort in
    `[low, high)`."""
    low = KEY_MARK.join((CREDENTIAL_ALERT_PREFIX, target, ""))
    return low, low + RUN_ID_END


def expiry_alert_key(target: str, expires: date) -> str:
    """`credential-expiry|<target>|<day>`: a known expiry told once, days ahead
    (docs/design.md §36); a new token's new date is a new key."""
    return KEY_MARK.join((EXPIRY_ALERT_PREFIX, target, expires.isoformat()))


def notice_key(recipe: str, episode: str, kind: str) -> str:
    """`backpressure|<recipe>|<since>|<paused or resumed>`: one notice per episode."""
    return KEY_MARK.join((NOTICE_PREFIX, recipe, episode, kind))


def digest_key(day: str) -> str:
    """`digest|<day>`: one operations digest per day."""
    return f"{DIGEST_PREFIX}{KEY_MARK}{day}"


def weekly_report_key(week: str) -> str:
    """`report|<ISO week>` (`report|2026-W49`): one weekly report per week across
    replicas (docs/design.md §38)."""
    return f"{REPORT_PREFIX}{KEY_MARK}{week}"


def review_reminder_key(draft: str, revision: int, interval: int) -> str:
    """`<draft key>|remind:<revision>:<n>`: the reminder of the n-th `remind_after` that one
    revision has waited, posted once across replicas (docs/design.md §35)."""
    return f"{draft}|remind:{revision}:{interval}"


def review_escalation_key(draft: str, waiting_since: datetime) -> str:
    """`<draft key>|escalate:<ready since>`: `alert_mentions` pinged once per wait."""
    return f"{draft}|escalate:{waiting_since.isoformat()}"


def redraft_key(draft: str, revision: int) -> str:
    """`<draft key>|redraft:<revision>`: one reviewer's redraft of one revision, claimed
    once however often the request is delivered (docs/design.md §22)."""
    return f"{draft}|redraft:{revision}"


PUBLISH_MARK = "|publish:"


PART_MARK = "|part:"  # a thread's later part: `<draft>|publish:<target>|part:2`


def publish_effect_key(draft: str, target: str) -> str:
    return f"{draft}{PUBLISH_MARK}{target}"


def publish_part_key(draft: str, target: str, part: int) -> str:
    """The effect key of a thread's `part` (1-based) on `target` (docs/design.md §31): the
    first part keeps the target's own key, so every receipt made before threads existed
    stays valid; a later part adds a readable `|part:N`."""
    if part < 1:
        raise ValueError(f"thread parts count from 1, not {part}")
    first = publish_effect_key(draft, target)
    return first if part == 1 else f"{first}{PART_MARK}{part}"


def part_of_publish_key(key: str) -> int:
    """Which part of its thread a publish effect key names: 1 for a target's own key."""
    head, mark, part = key.rpartition(PART_MARK)
    return int(part) if mark and PUBLISH_MARK in head and part.isdigit() else 1


def _without_part(key: str) -> str:
    head, mark, part = key.rpartition(PART_MARK)
    return head if mark and PUBLISH_MARK in head and part.isdigit() else key


def draft_of_publish_key(key: str) -> str:
    """The draft key inside a publish effect key (`<draft>|publish:<target>[|part:N]`)."""
    return _without_part(key).rpartition(PUBLISH_MARK)[0]


def target_of_publish_key(key: str) -> str:
    """The target id inside a publish effect key (`<draft>|publish:<target>[|part:N]`)."""
    return _without_part(key).rpartition(PUBLISH_MARK)[2]


UPLOAD_MARK = "|upload:"


def upload_effect_key(draft: str, target: str, sha256: str) -> str:
    """`<draft key>|upload:<target>|<sha256>`: one image's bytes uploaded to one target for
    one draft, once for every retry and thread part (docs/design.md §32). The draft is in
    the key because a media id serves one post: Mastodon attaches only media no status
    holds yet, and Bluesky deletes a blob no record references within minutes."""
    return f"{draft}{UPLOAD_MARK}{target}{KEY_MARK}{sha256}"


RENEWAL_MARK = "|renewal:"


def renewed_upload_key(upload_key: str, renewal: int) -> str:
    """`<upload key>|renewal:N`: the same image uploaded again for the same draft and
    target because the platform deleted the upload no post held (Mastodon, after a day);
    each renewal once, like the first upload (docs/design.md §32)."""
    return f"{upload_key}{RENEWAL_MARK}{renewal}"


CONTAINER_MARK = "|container:"


def container_effect_key(publish_key: str, renewal: int = 1) -> str:
    """`<draft key>|container:<target>|<part>`: the Threads media container made for one
    publish receipt (a target, or one part of its thread), before it is published
    (docs/design.md §24); `|renewal:N` once the container before it expired unpublished."""
    draft, target = draft_of_publish_key(publish_key), target_of_publish_key(publish_key)
    first = f"{draft}{CONTAINER_MARK}{target}{KEY_MARK}{part_of_publish_key(publish_key)}"
    return first if renewal <= 1 else f"{first}{RENEWAL_MARK}{renewal}"


ALT_TEXT_MARK = "|alt:"


def alt_text_key(draft: str, sha256: str) -> str:
    """`<draft key>|alt:<sha256>`: the one model call proposing an image's alt text for a
    draft (docs/design.md §32), claimed as its attempt row's id before the call, so a
    redelivered drop or a retry finds it and never pays again."""
    return f"{draft}{ALT_TEXT_MARK}{sha256}"


def alt_text_attempt_number(sha256: str) -> int:
    """The alt-text attempt's number within its run: negative, so it never takes a slot
    draft's numbers (1, 2, …) nor their `max` (`Attempts.last`); distinct per image."""
    return -(int(sha256[:7], 16) + 1)


def platform_of_target(target: str) -> str:
    """The platform a target id names (`bluesky` of `bluesky:acme.bsky.social`)."""
    return target.partition(":")[0]


SLACK_TARGET_PREFIX = "slack:"


def slack_target(channel: str) -> str:
    """A Slack channel's target id (`slack:C123`)."""
    return f"{SLACK_TARGET_PREFIX}{channel}"


def slack_channel_of_publish_key(key: str) -> str:
    """The channel of a publish receipt to a Slack channel; "" for any other key."""
    target = target_of_publish_key(key) if PUBLISH_MARK in key else ""
    return (
        target.removeprefix(SLACK_TARGET_PREFIX) if target.startswith(SLACK_TARGET_PREFIX) else ""
    )


MANUAL_PROOF = "manual:"  # a receipt a person marked published: no post id is known


def manual_proof(actor: str) -> str:
    """The external id of a publication a person marked published (`manual:U0ADMIN`)."""
    return f"{MANUAL_PROOF}{actor}"


def is_manual_proof(external_id: str) -> bool:
    return external_id.startswith(MANUAL_PROOF)


def parse_run_id(run: str) -> tuple[str, datetime, int]:
    """The inverse of `run_id`: (recipe, wall time, occurrence). ValueError for an item
    run or a person's post (`item_token_of_run`, `post_id_of_run` read those)."""
    recipe, _, wall = run.partition(RUN_MARK)
    if wall.startswith((ITEM_MARK, POST_MARK)):
        raise ValueError(f"an item or post run names no slot: {run!r}")
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
    so a second create of one publication fails instead of posting twice (docs/design.md §24).

    Its time is the slot named in the key's run id, its wall time read as UTC (a look-up
    has only the key, and a record key needs no zone), plus up to ~1 s from the key's
    hash so two keys of one slot differ; its clock id is the key's hash too: 30 bits that
    tell keys apart. An item run or a person's post names no slot: its time is a fixed
    base plus up to ~13 days from the key's hash. ValueError for a key without a run id.
    """
    digest = int.from_bytes(hashlib.sha256(effect_key.encode("utf-8")).digest()[:8], "big")
    clock = digest & ((1 << TID_CLOCK_BITS) - 1)
    jitter = (digest >> TID_CLOCK_BITS) & ((1 << TID_JITTER_BITS) - 1)
    try:
        run = run_of_draft_key(effect_key)
        if names_no_slot(run):
            spread = (digest >> TID_CLOCK_BITS) & ((1 << _ITEM_TID_SPREAD_BITS) - 1)
            wall = (_ITEM_TID_BASE + timedelta(microseconds=spread)).replace(tzinfo=None)
            jitter = 0
        else:
            _, wall, _ = parse_run_id(run)
    except (IndexError, ValueError):
        raise ValueError(f"not an effect key with a run id: {effect_key!r}") from None
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


def bluesky_part_record_key(effect_key: str, part: int) -> str:
    """The record key of a thread's `part` (1-based) published under the target's effect
    key: the first part's is `bluesky_record_key(effect_key)` itself, each later one that
    of the part's own key, so a second attempt names the same records (docs/design.md §31)."""
    if part == 1:
        return bluesky_record_key(effect_key)
    draft, target = draft_of_publish_key(effect_key), target_of_publish_key(effect_key)
    return bluesky_record_key(publish_part_key(draft, target, part))


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


DISCORD_NONCE_LENGTH = 25  # Create Message's `nonce`: a string of at most 25 characters


def discord_nonce(effect_key: str) -> str:
    """The `nonce` a Discord message is created under (with `enforce_nonce`): `g` and 24
    hex digits of the effect key's SHA-256 (96 bits), so every send of one key names the
    same nonce and Discord answers a resend within its window with the same message."""
    digest = hashlib.sha256(effect_key.encode("utf-8")).hexdigest()
    return "g" + digest[: DISCORD_NONCE_LENGTH - 1]
