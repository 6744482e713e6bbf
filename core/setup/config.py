"""The config file (docs/design.md §15): parsed, validated and resolved before anything runs.

A bad file never half-loads: `load_config` collects every problem, one line each
naming the recipe and the field, in words for people (never pydantic's own), and raises
`ConfigError` with all of them. A value's type is part of what a person wrote: `"1024"`
is not a number and `"yes"` not a boolean, so they are refused, never converted.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from core.drafting_policies import Drafting, LearnFrom, OnEmpty, OnSimilar, Variants
from core.egress.addresses import EgressAllow
from core.errors import ConfigError, MissingSecret
from core.policies import DstGap, DstRepeat, Overlap
from core.setup.approval_stages import ApprovalStage, approval_problems, defaults_for
from core.setup.config_errors import (
    DIGEST_AT_PATTERN,
    NAME_PATTERN,
    REPORT_AT_PATTERN,
    field_name,
    keys_at,
    message,
    publish_loc,
    source_loc,
    unknown_key,
)
from core.setup.durations import Duration, ZeroOrDuration
from core.setup.egress_section import egress_section
from core.setup.item_keys import ItemKeys, item_trigger_problems, lift_source, name_source
from core.setup.post_shape import MAX_THREAD_PARTS, post_shape_problems
from core.setup.publish_targets import PublishTarget, SecretTarget
from core.slots.schedule import render_template
from core.sources.specs import SourceSpec

SLACK_ID_PATTERN = re.compile(r"^[UWS][A-Z0-9]+$")
# Measured on tests/data/similar_pairs.jsonl (bench/similarity.py): precision 0.92,
# recall 0.94 at 78; below it same-template posts start to warn, above it paraphrases slip.
SIMILAR_WARN_DEFAULT = 78
# Both are part of every draft key, which travels in Slack button values, modal metadata
# and message metadata (2,000 to 3,000 characters at most): short caps keep a key well
# inside them (docs/design.md §2: keys stay readable).
NAME_MAX_LENGTH = 64
PLATFORM_MAX_LENGTH = 40
# The API ends a Message Batch 24 hours after its creation, done or not (docs/design.md §21).
BATCH_LIFETIME = timedelta(hours=24)
M = TypeVar("M", bound=BaseModel)
SECTIONS = ("slack", "defaults", "recipes", "egress")


def _known_zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}") from None
    return name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SlackSection(_Strict):
    review_channel: str = Field(min_length=1)
    alert_channel: str | None = None
    alert_mentions: list[str] = []
    approvers: list[str] = []
    admins: list[str] = []
    alert_reminder: Duration = timedelta(hours=4)  # re-ping while a run stays unresolved
    digest: bool = True  # a daily operations digest in the alert channel
    digest_at: str = Field(default="09:00", pattern=DIGEST_AT_PATTERN)
    digest_timezone: str = "UTC"  # the zone digest_at and report_at are read in
    # the weekly report in the alert channel (docs/design.md §38): a day and a time, like
    # "mon 09:00"; off unless set
    report_at: str | None = Field(default=None, pattern=REPORT_AT_PATTERN)

    @field_validator("alert_mentions", "approvers", "admins")
    @classmethod
    def _slack_ids(cls, ids: list[str]) -> list[str]:
        bad = [i for i in ids if not SLACK_ID_PATTERN.match(i)]
        if bad:
            raise ValueError(f"not a Slack user (U…/W…) or user group (S…) id: {', '.join(bad)}")
        return ids

    @field_validator("digest_timezone")
    @classmethod
    def _digest_zone(cls, name: str) -> str:
        return _known_zone(name)

    @property
    def alert_channel_or_review(self) -> str:
        return self.alert_channel or self.review_channel


def _one_or_many(value: Any) -> Any:
    """`publish` is one target table or a list of them (docs/design.md §24). A tuple, as
    strict validation of the tuple field takes no list once a validator has run."""
    if isinstance(value, dict):
        return (value,)
    if not isinstance(value, list | tuple):
        raise ValueError('must be a target table, like { to = "slack", … }, or a list of them')
    return tuple(value)


class RecipeSettings(_Strict):
    """Every key `[defaults]` may set; a recipe may override each one."""

    timezone: str = "UTC"
    model: str = "claude-sonnet-5-5"
    max_tokens: int = Field(default=1024, ge=1)
    pending_limit: int = Field(default=3, ge=0)
    review_window: Duration = timedelta(hours=48)
    approval_ttl: Duration = timedelta(hours=24)
    misfire_grace: Duration = timedelta(hours=1)
    model_timeout: Duration = timedelta(minutes=2)
    call_timeout: Duration = timedelta(seconds=30)
    claim_lease: Duration = timedelta(minutes=10)  # one claim's whole drafting, retries included
    heartbeat: Duration = timedelta(seconds=2)  # how often a holder renews its claim or receipt
    takeover_after: Duration = timedelta(seconds=8)  # a claim not renewed this long is taken over
    overlap: Overlap = Overlap.SKIP
    dst_gap: DstGap = DstGap.SHIFT
    dst_repeat: DstRepeat = DstRepeat.FIRST
    max_attempts: int = Field(default=4, ge=1)
    daily_token_budget: int = Field(default=0, ge=0)  # 0: no budget
    similar_warn: int = Field(default=SIMILAR_WARN_DEFAULT, ge=1, le=100)  # percent
    similar_window: Duration = timedelta(days=90)  # approvals and publications compared
    on_similar: OnSimilar = OnSimilar.WARN
    # docs/design.md §21: batch sends due slots as one Message Batch
    drafting: Drafting = Drafting.SYNC
    batch_gather: Duration = timedelta(seconds=30)  # due slots gathered this long into one batch
    batch_deadline: Duration = timedelta(hours=1)  # longest a slot waits on a batch, then sync
    # docs/design.md §22: the reviewer's loop
    approvals_required: int = Field(default=1, ge=1)  # distinct approvers of one revision
    editor_may_approve: bool = True  # false: whoever edited a revision cannot approve it
    approval_stages: list[ApprovalStage] = []  # empty: one stage, `approvals_required`
    max_redrafts: int = Field(default=3, ge=0)  # reviewer-requested redrafts per draft
    remind_after: Duration | None = None  # a waiting draft announced again this often
    escalate_after: Duration | None = None  # waiting this long pings alert_mentions once
    # docs/design.md §23: draft ahead, publish on time
    draft_ahead: ZeroOrDuration = timedelta(0)  # drafted this long ahead, published at slot
    publish_late: Duration = timedelta(hours=1)  # approved this long after its slot, still out
    # docs/design.md §27: what happened in the window, given to the model
    window: Duration | None = None  # None: items since the previous slot
    max_source_chars: int = Field(default=20000, ge=100)  # source text given to the model
    on_empty: OnEmpty = OnEmpty.SKIP  # a window with no items skips (no_news) or drafts
    learn_from: LearnFrom = LearnFrom.NONE  # "top": best posts and reviewers' asks, shown
    # docs/design.md §28: after publication, read back and counted
    verify_after: Duration = timedelta(minutes=2)  # a published post read back this late
    engagement_at: tuple[Duration, ...] = (  # each reading kept
        timedelta(hours=1),
        timedelta(hours=24),
        timedelta(days=7),
    )
    # docs/design.md §30: a version per target, threads (checked in core/setup/post_shape.py)
    variants: Variants = Variants.ONE
    thread: int = Field(default=1, ge=1, le=MAX_THREAD_PARTS)  # at most this many parts
    # docs/design.md §32: the model shown an image's pixels when it proposes its alt text
    describe_images: bool = False
    # docs/design.md §32: an items recipe's post carries the image its item brings
    source_images: bool = True

    @field_validator("timezone")
    @classmethod
    def _zone(cls, name: str) -> str:
        return _known_zone(name)

    @field_validator("engagement_at")
    @classmethod
    def _readings_in_order(cls, offsets: tuple[timedelta, ...]) -> tuple[timedelta, ...]:
        """Each reading is labelled by its offset: two alike would be one reading."""
        return tuple(sorted(set(offsets)))


class Recipe(RecipeSettings, ItemKeys):
    """One recipe with the defaults already applied: everything a run needs."""

    name: str = Field(pattern=NAME_PATTERN.pattern, max_length=NAME_MAX_LENGTH)
    platform: str = Field(min_length=1, max_length=PLATFORM_MAX_LENGTH, pattern=r"^[^|]+$")
    schedule: str
    system: str = ""
    prompt: str = Field(min_length=1)
    # `publish` in the file: one target table, a list of them, or none (no publish step)
    targets: Annotated[tuple[PublishTarget, ...], BeforeValidator(_one_or_many)] = Field(
        default=(), validation_alias="publish"
    )
    sources: tuple[SourceSpec, ...] = ()  # what happened, given to the model (core/sources/)

    @field_validator("schedule")
    @classmethod
    def _valid_cron(cls, expr: str) -> str:
        if len(expr.split()) != 5 or not croniter.is_valid(expr):
            raise ValueError(f"bad cron {expr!r}: want 5 fields (minute hour day month weekday)")
        return expr

    @field_validator("system", "prompt")
    @classmethod
    def _known_template_fields(cls, template: str) -> str:
        render_template(template, recipe="r", platform="p", slot=datetime(2026, 1, 1), version=1)
        return template

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def takes_snapshot(self) -> bool:
        """A run keeps a snapshot (docs/design.md §27): it reads sources or learns."""
        return bool(self.sources) or self.learn_from != LearnFrom.NONE

    @property
    def publish(self) -> PublishTarget | None:
        """The first target, for code that publishes to one destination; None: no publish."""
        return self.targets[0] if self.targets else None


@dataclass(frozen=True)
class Config:
    slack: SlackSection
    recipes: dict[str, Recipe]
    path: Path | None = None
    egress: EgressAllow = field(default_factory=EgressAllow)  # `[egress] allow`

    def missing_secrets(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """One line per publish target whose credential variable is not set."""
        lines = []
        for recipe in self.recipes.values():
            for target in recipe.targets:
                if isinstance(target, SecretTarget):
                    try:
                        target.secret(environ)
                    except MissingSecret as exc:
                        lines.append(f"recipe {recipe.name!r}: publish: {exc}")
        return lines

    def recipe(self, name: str) -> Recipe:
        from core.errors import UnknownRecipe

        try:
            return self.recipes[name]
        except KeyError:
            known = ", ".join(sorted(self.recipes)) or "none"
            raise UnknownRecipe(f"unknown recipe {name!r} (known: {known})") from None


def load_config(path: Path) -> Config:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError([f"GALLEY_CONFIG: cannot read {path}: {exc.strerror}"]) from None
    except UnicodeDecodeError as exc:
        byte = f"byte {exc.start} is 0x{exc.object[exc.start]:02x}"
        raise ConfigError([f"GALLEY_CONFIG: {path} is not UTF-8 text: {byte}"]) from None
    config = parse_config(text, source=str(path))
    return dataclasses.replace(config, path=path)


def parse_config(text: str, *, source: str = "config") -> Config:
    """Validate a whole TOML document; ConfigError lists every problem found. `source`
    names the file in a syntax error."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{source}: not valid TOML: {exc}"]) from None
    problems: list[str] = []
    for key in sorted(set(raw) - set(SECTIONS)):
        said = unknown_key(key, SECTIONS)
        problems.append(f"config: {key}: {said}")
    slack = _validate(SlackSection, raw.get("slack"), "[slack]", problems)
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        problems.append("[defaults]: must be a table")
        defaults = {}
    defaults = _valid_defaults(defaults, problems)
    recipes = _validate_recipes(raw.get("recipes", []), defaults, problems)
    problems += approval_problems(None if slack is None else slack.approvers, recipes.values())
    egress = egress_section(raw.get("egress", {}), problems)
    if problems:
        raise ConfigError(problems)
    assert slack is not None
    return Config(slack=slack, recipes=recipes, egress=egress)


def _valid_defaults(defaults: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """Report `[defaults]` problems once, then drop the bad keys so each recipe
    is not blamed for them again."""
    bad_keys = set(defaults) - set(RecipeSettings.model_fields)
    for key in sorted(bad_keys):
        problems.append(f"[defaults]: {key}: {unknown_key(key, RecipeSettings.model_fields)}")
    try:
        _checked(RecipeSettings, {k: v for k, v in defaults.items() if k not in bad_keys})
    except ValidationError as exc:
        for error in exc.errors():
            problems.append(f"[defaults]: {field_name(error['loc'])}: {message(error)}")
            bad_keys.add(str(error["loc"][0]))
    return {k: v for k, v in defaults.items() if k not in bad_keys}


def _validate_recipes(
    raw_recipes: Any, defaults: dict[str, Any], problems: list[str]
) -> dict[str, Recipe]:
    if not isinstance(raw_recipes, list):
        problems.append("[[recipes]]: must be an array of tables")
        return {}
    recipes: dict[str, Recipe] = {}
    for index, raw in enumerate(raw_recipes):
        if not isinstance(raw, dict):
            problems.append(f"recipe #{index + 1}: must be a table")
            continue
        label = (
            f"recipe {raw['name']!r}"
            if isinstance(raw.get("name"), str)
            else f"recipe #{index + 1}"
        )
        raw, lifted = lift_source(raw)  # docs/design.md §29: `source` read as one of `sources`
        before = len(problems)
        recipe = _validate(Recipe, {**defaults_for(defaults, raw), **raw}, label, problems)
        problems[before:] = [name_source(problem, lifted) for problem in problems[before:]]
        if recipe is None:
            continue
        problems += item_trigger_problems(recipe, label, lifted)
        if recipe.name in recipes:
            problems.append(f"{label}: name: duplicate recipe name")
            continue
        if recipe.claim_lease <= recipe.model_timeout:
            problems.append(f"{label}: claim_lease: must be longer than model_timeout")
        if recipe.takeover_after < recipe.heartbeat * 2:
            problems.append(f"{label}: takeover_after: must be at least twice heartbeat")
        if recipe.batch_gather >= recipe.batch_deadline:
            problems.append(f"{label}: batch_gather: must be shorter than batch_deadline")
        if recipe.batch_deadline > BATCH_LIFETIME:
            problems.append(f"{label}: batch_deadline: must be at most 24h (batches expire then)")
        ids = [target.target for target in recipe.targets]
        for target_id in sorted({t for t in ids if ids.count(t) > 1}):
            problems.append(f"{label}: publish: duplicate target {target_id!r}")
        problems.extend(
            f"{label}: {problem}"
            for problem in post_shape_problems(recipe.variants, recipe.thread, recipe.targets)
        )
        names = [source.label for source in recipe.sources]
        for name in sorted({n for n in names if names.count(n) > 1}):
            problems.append(f"{label}: sources: two sources named {name!r}: give each a name")
        recipes[recipe.name] = recipe
    return recipes


def _validate(model: type[M], raw: Any, label: str, problems: list[str]) -> M | None:
    if raw is None:
        problems.append(f"{label}: missing")
        return None
    try:
        return _checked(model, raw)
    except ValidationError as exc:
        single = isinstance(raw, dict) and isinstance(raw.get("publish"), dict)
        for error in exc.errors():
            loc = error["loc"]
            if loc[:1] == ("publish",):
                loc = publish_loc(loc, single)
            elif loc[:1] == ("sources",):
                loc = source_loc(loc)
            said = message(error)
            if error["type"] == "extra_forbidden":
                said = unknown_key(str(error["loc"][-1]), keys_at(model, error["loc"]))
            problems.append(f"{label}: {field_name(loc)}: {said}")
        return None


def _checked(model: type[M], raw: Any) -> M:
    """Validate TOML's values as the JSON types they are (strings, integers, booleans,
    arrays, tables), strictly: nothing is converted from one type to another. TOML's
    dates and times, which no key takes, arrive as text."""
    return model.model_validate_json(json.dumps(raw, default=str), strict=True)
