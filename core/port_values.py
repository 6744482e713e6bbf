"""The values the ports carry (core/ports.py holds the ports themselves): what the
model is asked and answers, what a review message shows, what leaves for a destination
and what is read back (an image on its way to a platform is in core/image_values.py),
and a run's alert. Frozen values only: no behaviour, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.image_values import ImageBytes, ImageInput, LinkCard, ShownImage, UploadedMedia
from core.policies import AlertKind, Backpressure
from core.post_body import ImageRef


@dataclass(frozen=True)
class VersionAsk:
    """One version the model is asked for (docs/design.md §30): the key it is stored under
    (a target, or `EVERY_TARGET`), the words naming where it is read, and each part's
    limit in that destination's own units (None: no limit)."""

    key: str
    label: str
    limit: int | None
    unit: str


@dataclass(frozen=True)
class PostShape:
    """What a structured draft request asks for: these versions, each 1..`parts` parts."""

    versions: tuple[VersionAsk, ...]
    parts: int


@dataclass(frozen=True)
class DraftRequest:
    model: str
    system: str
    prompt: str
    max_tokens: int
    timeout: timedelta
    recipe: str = ""  # for metrics and logs only; never sent to the model
    shape: PostShape | None = None  # asked for through a tool: a version per target, threads
    images: tuple[ImageInput, ...] = ()  # sent as image blocks before the prompt


@dataclass(frozen=True)
class ModelReply:
    text: str
    model: str
    request_id: str | None
    stop_reason: str | None
    input_tokens: int
    output_tokens: int
    cache_creation_tokens: int
    cache_read_tokens: int
    latency_s: float | None = None  # sent to answered, when the adapter timed it
    before_send_s: float = 0.0  # spent before the request left (SDK import, client set-up)
    structured: Mapping[str, object] | None = None  # a tool_use answer's input, unvalidated


@dataclass(frozen=True)
class MessageRef:
    channel: str
    ts: str


@dataclass(frozen=True)
class SimilarPost:
    """The draft people already saw that a fresh draft reads most like."""

    draft_key: str
    score: int  # percent, as stored on the draft
    method: str  # a SimilarityMethod value
    state: str  # ready (waiting for review), approved or published
    at: datetime  # when it reached that state
    message: MessageRef | None  # its publication in Slack, else its review message, if known


@dataclass(frozen=True)
class RecipeRecord:
    """How people received a recipe's drafts lately: the reviewer's sense of its quality."""

    recipe: str
    days: int
    approved: int  # approved or published
    decided: int  # approved, published, rejected or expired unreviewed
    last_rejected_at: datetime | None = None
    last_rejection_reason: str | None = None

    @property
    def approval_rate(self) -> float | None:
        return self.approved / self.decided if self.decided else None


@dataclass(frozen=True)
class ApprovalProgress:
    """Who approved a draft's current revision, of how many it needs, and who listed
    in `[slack] approvers` may still approve it (docs/design.md §22)."""

    approvers: tuple[str, ...]
    required: int
    may_still: tuple[str, ...] = ()  # listed approvers (users or groups) yet to approve
    anyone: bool = False  # no approvers are listed: anyone may approve
    # approval_stages (docs/design.md §22): the stage waiting, of how many, and who
    # approved the stages before it; one stage named "approval" without them
    stage: str = "approval"
    stage_number: int = 1
    stages: int = 1
    earlier: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (stage, who approved it)

    @property
    def decided(self) -> bool:
        return len(self.approvers) >= self.required


@dataclass(frozen=True)
class RedraftNote:
    """The revision a reviewer's redraft made, for whom, and what they asked."""

    revision: int
    requested_by: str
    note: str


@dataclass(frozen=True)
class PublishedLink:
    """Where one target's publication of a draft can be read: its public URL, from the
    receipt (docs/design.md §24)."""

    target: str
    url: str


@dataclass(frozen=True)
class BasisItem:
    """One source item a draft was written from, as people see it: its title and link."""

    title: str
    link: str | None


@dataclass(frozen=True)
class DraftBasis:
    """What a draft was written from (docs/design.md §27): its run's snapshot, in the
    order the model saw it, and the optional sources left out of it."""

    items: tuple[BasisItem, ...]
    left_out: tuple[str, ...] = ()  # source names
    image_notes: tuple[str, ...] = ()  # why an item's image is not in the draft
    # read late for an earlier slot: the window's end, after which entries were left out
    closed_at: datetime | None = None


@dataclass(frozen=True)
class ReviewItem:
    """One draft as a review message shows it, with its decision once there is one."""

    draft_key: str
    run_id: str
    state: str
    revision: int
    text: str
    recipe: str
    platform: str
    slot_at: datetime
    version: int
    model: str | None
    input_tokens: int
    output_tokens: int
    decided_by: str | None
    decided_at: datetime | None
    decision_reason: str | None
    similar: SimilarPost | None = None  # set when the score reaches the recipe's similar_warn
    record: RecipeRecord | None = None
    approvals: ApprovalProgress | None = None  # set where more than one approval is needed
    redrafted: RedraftNote | None = None  # the current revision, when a redraft made it
    publish_at: datetime | None = None  # approved: when its run may go out (docs/design.md §23)
    publishes: str | None = None  # approved, waiting: "Mon 2 Nov 09:00 (Europe/London)"
    missed_slot: bool = False  # expired: not approved by its slot plus publish_late
    fits: tuple[Fit, ...] = ()  # waiting drafts: each target's count against its limit
    published: tuple[PublishedLink, ...] = ()  # decided drafts: where each target has it
    gone: tuple[str, ...] = ()  # published, then found gone: "Published to Mastodon, then gone (…)"
    basis: DraftBasis | None = (
        None  # docs/design.md §27: a recipe with sources: the items it drafted from
    )
    images: tuple[ShownImage, ...] = ()  # docs/design.md §32: the draft's images
    image_problems: tuple[str, ...] = ()  # waiting drafts: why its images block approval


@dataclass(frozen=True)
class BackpressureNotice:
    """Drafting of a recipe paused because `waiting` drafts wait for review (its
    pending_limit is `limit`), or resumed once people caught up."""

    recipe: str
    kind: Backpressure
    waiting: int = 0
    limit: int | None = None


@dataclass(frozen=True)
class ReviewReminder:
    """A draft still waiting, announced again in its review message's thread: whom to
    ping (approvers who have not approved, or `alert_mentions` when it is escalated)."""

    thread: MessageRef  # the review message
    draft_key: str
    recipe: str
    revision: int
    waiting: timedelta  # since it became ready for review
    mentions: list[str]
    escalated: bool = False


@dataclass(frozen=True)
class Publication:
    """What leaves the building: approved text, bound to its effect key.

    `text` is the first (or only) part of this target's version: what a post is matched
    by when it is looked up. `replies` are the thread's later parts, in order, each
    replying to the one before; `images` go with the first part (docs/design.md §31 and §32)."""

    effect_key: str
    draft_key: str
    recipe: str
    platform: str
    slot_at: datetime
    text: str
    approver: str
    approved_at: datetime
    replies: tuple[str, ...] = ()
    images: tuple[ImageRef, ...] = ()
    reply_to: ThreadPlace | None = None  # a later part sent alone: where it goes
    media: tuple[UploadedMedia, ...] = ()  # the images as this target holds them, uploaded
    card: LinkCard | None = None  # a link card, or why there is none (docs/design.md §32)
    # the images' bytes, for a destination that sends them inside the post's own request
    # (Discord's multipart message): it has no upload of its own (`AttachmentTaker`)
    attachments: tuple[ImageBytes, ...] = ()
    container: str | None = None  # Threads: the container it publishes (docs/design.md §24)

    @property
    def parts(self) -> tuple[str, ...]:
        """Every part of the thread, the first one first."""
        return (self.text, *self.replies)


@dataclass(frozen=True)
class ThreadPlace:
    """Where a thread's later part is published (docs/design.md §31): the destination's
    ids of the part before it (Mastodon's `in_reply_to_id`) and of the first part (Slack's
    `thread_ts`), each read from that part's receipt."""

    parent: str
    root: str


def _nothing_taken(external_id: str) -> bool:
    return False


@dataclass(frozen=True)
class PostQuery:
    """What a destination is asked after an unknown answer, or before acting: is there a
    post under this effect key? Destinations with no key of their own (Mastodon's listing,
    LinkedIn's) match `text`, the text the receipt was sent with, among the account's
    posts made since `since`: the receipt's first send by the database's clock, less
    `LOOKUP_SKEW`. A post `taken` (already the proof of another receipt to the same
    target) is never this one's (docs/design.md §24, look-up proof)."""

    effect_key: str
    text: str
    since: datetime
    taken: Callable[[str], bool] = _nothing_taken
    reply_to: ThreadPlace | None = None  # a thread's later part: looked for in its thread
    containers: tuple[str, ...] = ()  # Threads: the receipt's media containers, newest first


@dataclass(frozen=True)
class Fit:
    """How a draft measures against one destination's limit, in that destination's own
    units (Bluesky graphemes, Mastodon characters with links as 23, …)."""

    target: str
    label: str  # for people: "Bluesky", "Mastodon (mastodon.social)"
    count: int
    limit: int

    @property
    def fits(self) -> bool:
        return self.count <= self.limit


@dataclass(frozen=True)
class PostFound:
    """A published post read back where it was published."""


@dataclass(frozen=True)
class PostGone:
    """The platform says the post is not there (`status`: its answer, 404 or 410)."""

    status: int
    detail: str


@dataclass(frozen=True)
class PostUnknown:
    """A read that cannot tell (a 429, a 5xx, no answer): never taken as gone."""

    why: str
    retry_after: float | None = None


PostRead = PostFound | PostGone | PostUnknown


@dataclass(frozen=True)
class PostCounts:
    """One reading of a post's engagement, in the words every platform maps to (a
    LinkedIn reaction is a like, a comment a reply; a Mastodon boost a repost).
    `impressions` is None where the platform or the token's scopes give none, and `note`
    then says why."""

    likes: int = 0
    reposts: int = 0
    replies: int = 0
    quotes: int = 0
    impressions: int | None = None
    note: str | None = None


@dataclass(frozen=True)
class RunAlert:
    """A run people must look at: what is known, whom to ping, and what they can do
    (`kind` decides the buttons)."""

    run_id: str
    recipe: str
    headline: str
    facts: list[str]
    mentions: list[str]
    kind: AlertKind = AlertKind.PUBLISH
    # A settled alert's rewrite: who moved the run on (a person's id, or CLI_ACTOR), or
    # "" when no person did (Galley itself). None: the alert is not settled.
    settled_by: str | None = None
