"""The config file (docs/design.md §15): parsed, validated and resolved before anything runs.

A bad file never half-loads: `load_config` collects every problem, one line each
naming the recipe and the field, in words for people (never pydantic's own), and raises
`ConfigError` with all of them. A value's type is part of what a person wrote: `"1024"`
is not a number and `"yes"` not a boolean, so they are refused, never converted.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from abc import abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit
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

from core.errors import ConfigError, MissingSecret
from core.identity import slack_target
from core.policies import (
    Drafting,
    DstGap,
    DstRepeat,
    LearnFrom,
    OnEmpty,
    OnSimilar,
    Overlap,
    SourceKind,
    Variants,
)
from core.setup.durations import Duration, ZeroOrDuration
from core.setup.item_keys import ItemKeys, item_trigger_problems, lift_source, name_source
from core.setup.post_shape import MAX_THREAD_PARTS, post_shape_problems
from core.sources.specs import (
    CHANNEL_PATTERN,
    HTTP_URL_PATTERN,
    REPO_PATTERN,
    SOURCE_MODELS,
    SourceSpec,
)

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")
DIGEST_AT_PATTERN = r"^([01]\d|2[0-3]):[0-5]\d$"
SLACK_ID_PATTERN = re.compile(r"^[UWS][A-Z0-9]+$")
TEMPLATE_FIELDS = ("recipe", "platform", "slot", "version")
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
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HANDLE_PATTERN = re.compile(
    r"^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z][A-Za-z0-9-]*$"
)
DID_PATTERN = re.compile(r"^did:[a-z]+:[A-Za-z0-9._:%-]+$")
BASE_URL_PATTERN = re.compile(r"^https?://[^\s/?#|]+(/[^\s?#|]*)?$")
M = TypeVar("M", bound=BaseModel)


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
    digest_timezone: str = "UTC"  # the zone digest_at is read in

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


class SlackTarget(_Strict):
    to: Literal["slack"]
    channel: str = Field(min_length=1)

    @field_validator("channel")
    @classmethod
    def _channel(cls, channel: str) -> str:
        if not re.match(r"^[^|\s]+$", channel):
            raise ValueError("a channel id has no spaces and no |")  # | separates key parts
        return channel

    @property
    def target(self) -> str:
        return slack_target(self.channel)


class WebhookTarget(_Strict):
    to: Literal["webhook"]
    url: str = Field(pattern=r"^https?://")
    status_url: str | None = Field(default=None, pattern=r"^https?://")

    @property
    def target(self) -> str:
        return "webhook"


class _SecretTarget(_Strict):
    """A destination whose credential is read from the environment variable `secret_env`
    (never from the file), so two accounts on one platform can name two variables."""

    secret_env: str

    @field_validator("secret_env")
    @classmethod
    def _env_name(cls, name: str) -> str:
        if not ENV_NAME_PATTERN.match(name):
            raise ValueError(f"not an environment variable name: {name!r}")
        return name

    @property
    @abstractmethod
    def target(self) -> str:
        """The target id inside effect keys; each platform's model names its own."""

    def secret(self, environ: Mapping[str, str] | None = None) -> str:
        """The credential, read when it is needed; MissingSecret names the variable."""
        value = (os.environ if environ is None else environ).get(self.secret_env, "")
        if not value.strip():
            raise MissingSecret(self.secret_env, self.target)
        return value.strip()


class BlueskyTarget(_SecretTarget):
    to: Literal["bluesky"]
    handle: str  # the account's handle (acme.bsky.social) or DID
    service: str = "https://bsky.social"  # its PDS (or a local fake)
    secret_env: str = "GALLEY_BLUESKY_PASSWORD"  # an app password

    @field_validator("handle")
    @classmethod
    def _handle(cls, handle: str) -> str:
        if not (HANDLE_PATTERN.match(handle) or DID_PATTERN.match(handle)):
            hint = " (without the @)" if handle.startswith("@") else ""
            raise ValueError(f"not a Bluesky handle like acme.bsky.social, nor a DID{hint}")
        return handle

    @field_validator("service")
    @classmethod
    def _service(cls, url: str) -> str:
        return _base_url(url)

    @property
    def target(self) -> str:
        return f"bluesky:{self.handle}"


class MastodonTarget(_SecretTarget):
    to: Literal["mastodon"]
    instance: str  # base URL: https://mastodon.social
    visibility: Literal["public", "unlisted", "private", "direct"] = "public"
    secret_env: str = "GALLEY_MASTODON_TOKEN"  # write:statuses and read:statuses

    @field_validator("instance")
    @classmethod
    def _instance(cls, url: str) -> str:
        return _base_url(url)

    @property
    def target(self) -> str:
        """`mastodon:mastodon.social`; a second account on one instance is told apart by
        its variable: `mastodon:mastodon.social+GALLEY_MASTODON_TOKEN_TEAM`."""
        host = urlsplit(self.instance)
        where = (host.netloc + host.path.rstrip("/")).lower()
        default = MastodonTarget.model_fields["secret_env"].default
        return f"mastodon:{where}" + ("" if self.secret_env == default else f"+{self.secret_env}")


class LinkedInTarget(_SecretTarget):
    to: Literal["linkedin"]
    author: str  # urn:li:organization:N (a page) or urn:li:person:ID (a member)
    api: str = "https://api.linkedin.com/rest/"
    version: str = "202511"  # the LinkedIn-Version header: YYYYMM; versions retire after a year

    @field_validator("version")
    @classmethod
    def _version(cls, version: str) -> str:
        if not re.match(r"^\d{6}(\.\d{2})?$", version):
            raise ValueError('must be a LinkedIn API version like "202511"')
        return version

    secret_env: str = "GALLEY_LINKEDIN_TOKEN"  # w_organization_social, r_organization_social

    @field_validator("author")
    @classmethod
    def _author(cls, author: str) -> str:
        if not re.match(r"^urn:li:(organization|person):[A-Za-z0-9_-]+$", author):
            raise ValueError("must be urn:li:organization:N or urn:li:person:ID")
        return author

    @field_validator("api")
    @classmethod
    def _api(cls, url: str) -> str:
        return _base_url(url) + "/"  # paths are joined onto it: posts, posts?q=author

    @property
    def is_organization(self) -> bool:
        return self.author.startswith("urn:li:organization:")

    @property
    def target(self) -> str:
        return f"linkedin:{self.author}"


PublishTarget = Annotated[
    SlackTarget | WebhookTarget | BlueskyTarget | MastodonTarget | LinkedInTarget,
    Field(discriminator="to"),
]
SecretTarget = BlueskyTarget | MastodonTarget | LinkedInTarget


def _base_url(url: str) -> str:
    """An http(s) base URL with no query or fragment, without its trailing slash."""
    if not BASE_URL_PATTERN.match(url):
        raise ValueError(f"not an http(s) base URL: {url!r}")
    return url.rstrip("/")


def _one_or_many(value: Any) -> Any:
    """`publish` is one target table or a list of them (docs/design.md §15). A tuple, as
    strict validation of the tuple field takes no list once a validator has run."""
    if isinstance(value, dict):
        return (value,)
    if not isinstance(value, list | tuple):
        raise ValueError('must be a target table, like { to = "slack", … }, or a list of them')
    return tuple(value)


class ApprovalStage(_Strict):
    """One stage of a recipe's approval (docs/design.md §22): who may approve at it
    (users and user groups) and how many distinct people it needs."""

    name: str = Field(min_length=1)
    approvers: list[str] = []  # empty: anyone allowed by `[slack] approvers`
    required: int = Field(default=1, ge=1)


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


def render_template(
    template: str, *, recipe: str, platform: str, slot: datetime, version: int
) -> str:
    """Fill `{recipe}`, `{platform}`, `{slot:%d %B}`, `{version}`; ValueError on others."""
    try:
        return template.format(recipe=recipe, platform=platform, slot=slot, version=version)
    except (KeyError, IndexError, AttributeError) as exc:
        raise ValueError(
            f"bad template field {exc}: use {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}"
        ) from None
    except ValueError as exc:
        raise ValueError(f"bad template: {exc}") from None


@dataclass(frozen=True)
class Config:
    slack: SlackSection
    recipes: dict[str, Recipe]
    path: Path | None = None

    def missing_secrets(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """One line per publish target whose credential variable is not set."""
        lines = []
        for recipe in self.recipes.values():
            for target in recipe.targets:
                if isinstance(target, _SecretTarget):
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
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"GALLEY_CONFIG: cannot read {path}: {exc.strerror}"]) from None
    config = parse_config(text, source=str(path))
    return Config(slack=config.slack, recipes=config.recipes, path=path)


def parse_config(text: str, *, source: str = "config") -> Config:
    """Validate a whole TOML document; ConfigError lists every problem found. `source`
    names the file in a syntax error."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{source}: not valid TOML: {exc}"]) from None
    problems: list[str] = []
    for key in sorted(set(raw) - {"slack", "defaults", "recipes"}):
        said = _unknown_key(key, ("slack", "defaults", "recipes"))
        problems.append(f"config: {key}: {said}")
    slack = _validate(SlackSection, raw.get("slack"), "[slack]", problems)
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        problems.append("[defaults]: must be a table")
        defaults = {}
    defaults = _valid_defaults(defaults, problems)
    recipes = _validate_recipes(raw.get("recipes", []), defaults, problems)
    if slack is not None:
        problems += _too_few_approvers(slack, recipes)
    problems += [problem for r in recipes.values() for problem in _stage_problems(r)]
    if slack is not None:
        problems += _stage_approvers_not_allowed(slack, recipes)
    if problems:
        raise ConfigError(problems)
    assert slack is not None
    return Config(slack=slack, recipes=recipes)


def _too_few_approvers(slack: SlackSection, recipes: dict[str, Recipe]) -> list[str]:
    """A recipe needing more approvers than `[slack] approvers` names could never be
    approved. A user group (S…) may hold any number of people, so it is not counted."""
    listed = slack.approvers
    if not listed or any(person.startswith("S") for person in listed):
        return []
    return [
        f"recipe {r.name!r}: approvals_required: {r.approvals_required} approvals needed but "
        f"[slack] approvers names only {len(set(listed))}"
        for r in recipes.values()
        if r.approvals_required > len(set(listed))
    ]


def _stage_problems(recipe: Recipe) -> list[str]:
    """`approval_stages` replaces the one-stage `approvals_required`; its names are
    unique, and a stage naming users only needs no more approvals than it names."""
    stages, where = recipe.approval_stages, f"recipe {recipe.name!r}: approval_stages"
    problems = []
    if stages and "approvals_required" in recipe.model_fields_set:
        problems.append(f"{where}: give either approval_stages or approvals_required, not both")
    names = [stage.name for stage in stages]
    twice = sorted({name for name in names if names.count(name) > 1})
    problems += [f"{where}: stage {name!r} named twice" for name in twice]
    problems += [
        f"{where}: stage {s.name!r} needs {s.required} approvals but names only "
        f"{len(set(s.approvers))}"
        for s in stages
        if not any(p.startswith("S") for p in s.approvers) and s.required > len(set(s.approvers))
    ]
    return problems


def _stage_approvers_not_allowed(slack: SlackSection, recipes: dict[str, Recipe]) -> list[str]:
    """A stage's approver must also be allowed by `[slack] approvers`, or their clicks are
    refused before any stage is looked at. Only judged when that list names users only."""
    listed = slack.approvers
    if not listed or any(person.startswith("S") for person in listed):
        return []
    return [
        f"recipe {r.name!r}: approval_stages: stage {stage.name!r} names {who}, who is not in "
        "[slack] approvers"
        for r in recipes.values()
        for stage in r.approval_stages
        for who in stage.approvers
        if who not in listed
    ]


def _valid_defaults(defaults: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """Report `[defaults]` problems once, then drop the bad keys so each recipe
    is not blamed for them again."""
    bad_keys = set(defaults) - set(RecipeSettings.model_fields)
    for key in sorted(bad_keys):
        problems.append(f"[defaults]: {key}: {_unknown_key(key, RecipeSettings.model_fields)}")
    try:
        _checked(RecipeSettings, {k: v for k, v in defaults.items() if k not in bad_keys})
    except ValidationError as exc:
        for error in exc.errors():
            problems.append(f"[defaults]: {_field_name(error['loc'])}: {_message(error)}")
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
        recipe = _validate(Recipe, {**defaults, **raw}, label, problems)
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
                loc = _publish_loc(loc, single)
            elif loc[:1] == ("sources",):
                loc = _source_loc(loc)
            said = _message(error)
            if error["type"] == "extra_forbidden":
                said = _unknown_key(str(error["loc"][-1]), _keys_at(model, error["loc"]))
            problems.append(f"{label}: {_field_name(loc)}: {said}")
        return None


TARGETS: dict[str, type[_Strict]] = {
    "slack": SlackTarget,
    "webhook": WebhookTarget,
    "bluesky": BlueskyTarget,
    "mastodon": MastodonTarget,
    "linkedin": LinkedInTarget,
}


def _keys_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the table holding an unknown key may have: a publish target's (pydantic's
    loc names its tag) or the model's own."""
    if loc[:1] == ("publish",):
        tag = next((part for part in loc[1:] if isinstance(part, str) and part in TARGETS), None)
        return list(TARGETS[tag].model_fields) if tag else ["to"]
    if loc[:1] == ("sources",) and len(loc) > 2 and loc[2] in SOURCE_MODELS:
        return list(SOURCE_MODELS[SourceKind(loc[2])].model_fields)
    return [str(f.validation_alias or name) for name, f in model.model_fields.items()]


def _unknown_key(key: str, valid: Iterable[str]) -> str:
    """An unknown key, with the likeliest one meant and every key the table takes."""
    keys = sorted(valid)
    close = difflib.get_close_matches(key, keys, n=1)
    meant = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown key{meant} (valid keys: {', '.join(keys)})"


def _publish_loc(loc: tuple[int | str, ...], single: bool) -> tuple[int | str, ...]:
    """`publish.url`, or `publish[2].url` in a list: pydantic's loc also names the list index
    (0 for a single table) and the union's tag, which say nothing to the reader."""
    if len(loc) < 2 or not isinstance(loc[1], int):
        return loc
    head = "publish" if single else f"publish[{loc[1] + 1}]"
    return (head, *loc[3:])


def _source_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
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


def _checked(model: type[M], raw: Any) -> M:
    """Validate TOML's values as the JSON types they are (strings, integers, booleans,
    arrays, tables), strictly: nothing is converted from one type to another. TOML's
    dates and times, which no key takes, arrive as text."""
    return model.model_validate_json(json.dumps(raw, default=str), strict=True)


def _field_name(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc if not str(part).startswith("function-")) or "?"


# What a value of a pattern-checked field must look like, in words.
PATTERN_WORDS = {
    NAME_PATTERN.pattern: "use lower-case letters, digits and '-', starting with a letter or digit",
    r"^[^|]+$": "must not contain '|'",
    DIGEST_AT_PATTERN: 'want a time of day as HH:MM on a 24-hour clock, like "09:00"',
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


def _message(error: Any) -> str:
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
