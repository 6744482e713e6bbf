"""The ports: small interfaces the domain needs from the outside world.

Adapters live elsewhere (`core/drafting/anthropic_drafter.py` for Anthropic, `bot/` for
Slack). The domain depends only on these Protocols, so a notebook or a test can supply its own.
The values they carry are defined in core/port_values.py and core/image_values.py and
handed on from here, so `from core.ports import ReviewItem` keeps working for the
hundred-odd modules that say it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from core.clock import Clock as Clock
from core.clock import SystemClock as SystemClock
from core.image_values import ImageBytes, ImageInput, LinkCard, ShownImage, UploadedMedia
from core.policies import ContainerStatus, ThreadStyle
from core.port_values import (
    ApprovalProgress,
    BackpressureNotice,
    BasisItem,
    DraftBasis,
    DraftRequest,
    Fit,
    MessageRef,
    ModelReply,
    PostCounts,
    PostFound,
    PostGone,
    PostQuery,
    PostRead,
    PostShape,
    PostUnknown,
    Publication,
    PublishedLink,
    RecipeRecord,
    RedraftNote,
    ReviewItem,
    ReviewReminder,
    RunAlert,
    SimilarPost,
    ThreadPlace,
    VersionAsk,
)

__all__ = [
    "Alerter",
    "ApprovalProgress",
    "AttachmentTaker",
    "BackpressureNotice",
    "BasisItem",
    "Clock",
    "ContainerPublisher",
    "Directory",
    "DraftBasis",
    "DraftRequest",
    "Drafter",
    "Fit",
    "ImageBytes",
    "ImageInput",
    "ImageUploader",
    "LinkCard",
    "LinkCardTaker",
    "MessageRef",
    "ModelReply",
    "PostCounts",
    "PostFound",
    "PostGone",
    "PostQuery",
    "PostRead",
    "PostReader",
    "PostShape",
    "PostUnknown",
    "Publication",
    "PublishedLink",
    "Publisher",
    "RecipeRecord",
    "RedraftNote",
    "ReviewItem",
    "ReviewReminder",
    "ReviewSurface",
    "ReviewThread",
    "RunAlert",
    "SendMarker",
    "ShownImage",
    "SimilarPost",
    "SystemClock",
    "ThreadPlace",
    "ThreadPublisher",
    "UploadedMedia",
    "VersionAsk",
]


class Drafter(Protocol):
    def draft(self, request: DraftRequest) -> ModelReply:
        """One model call, no retries; raises `ModelCallFailed` with its outcome."""
        ...


class Directory(Protocol):
    def group_members(self, group_id: str) -> frozenset[str]:
        """User ids in a user group (`S…`); may be cached briefly by the adapter."""
        ...


class ReviewSurface(Protocol):
    """Where people review drafts. Posting is an effect: see core/review/outbox.py."""

    def post_review(self, item: ReviewItem) -> MessageRef:
        """Post once; raise EffectNotSent or EffectOutcomeUnknown when it fails."""
        ...

    def find_review(self, draft_key: str) -> MessageRef | None:
        """The earlier post for this draft, None if clearly absent; LookupUnavailable if
        the destination cannot tell."""
        ...

    def update_review(self, ref: MessageRef, item: ReviewItem) -> None:
        """Show the item's current state (decision, expiry, new revision)."""
        ...

    def announce(self, notice: BackpressureNotice) -> MessageRef:
        """A notice in the review channel (backpressure paused / resumed)."""
        ...


class ReviewThread(Protocol):
    """Replies in a review message's thread (the bot's Slack review surface)."""

    def remind(self, reminder: ReviewReminder) -> MessageRef:
        """Post the reminder in its thread; the reply's reference."""
        ...


class Publisher(Protocol):
    """A destination for approved drafts. Adapters: webhook, Bluesky, Mastodon, LinkedIn
    and Discord (core), Slack channel (bot)."""

    @property
    def target(self) -> str:
        """Names the destination inside effect keys (never contains `|`): `slack:C0ANNOUNCE`,
        `webhook`, `bluesky:acme.bsky.social`, `mastodon:mastodon.social`,
        `linkedin:urn:li:organization:123`."""
        ...

    def publish(self, publication: Publication) -> str:
        """Act once; return the destination's id for it. Raise EffectNotSent (known not
        to have happened; `permanent` when retrying cannot help, `auth` when credentials
        were refused, `retry_after` when the destination asked for a wait) or
        EffectOutcomeUnknown."""
        ...

    def lookup(self, query: PostQuery) -> str | None:
        """The id of an earlier publication under this key, None when clearly absent;
        raise LookupUnavailable when the destination cannot tell."""
        ...

    def link(self, external_id: str) -> str | None:
        """The published post's public URL, None when the destination has none."""
        ...

    def fit(self, text: str) -> Fit | None:
        """`text` measured against this destination's limit; None when it has none."""
        ...


@runtime_checkable
class ThreadPublisher(Protocol):
    """A destination that publishes threads (docs/design.md §31). ONE_CALL: `publish`
    takes the whole thread (`Publication.replies`) and its receipt proves every part.
    PART_BY_PART: `publish` is called once per part, a later part with `reply_to` set.
    A publisher without `thread_style` takes no thread: a version of several parts is
    refused for it, never split into unrelated posts."""

    thread_style: ThreadStyle


@runtime_checkable
class SendMarker(Protocol):
    """A destination that cannot be asked afterwards whether a post went out (Telegram):
    its receipt records the moment the call leaves (`EffectSpec.marks_send`), so a holder
    that died before then provably sent nothing and the post is sent again, not left for
    a person."""

    marks_send: bool


@runtime_checkable
class PostReader(Protocol):
    """A publisher that can read its posts back (docs/design.md §28): Bluesky, Mastodon,
    a webhook with a status URL. `counts_per_request` is how many posts one counts
    request takes (Bluesky `getPosts`: 25); 0 where the destination gives no counts."""

    counts_per_request: int

    def read_post(self, external_id: str, effect_key: str) -> PostRead:
        """Is the post (`external_id`, published under `effect_key`) still there? Found,
        gone, or cannot tell."""
        ...

    def read_counts(self, external_ids: Sequence[str]) -> Mapping[str, PostCounts]:
        """Counts of at most `counts_per_request` posts; a post missing from the answer
        could not be read. Raise ReadRefused when the platform refuses the read for now."""
        ...


class Alerter(Protocol):
    def alert(self, alert: RunAlert) -> MessageRef:
        """Post one alert (with Mark published / Retry / Cancel where they apply)."""
        ...

    def settle(self, ref: MessageRef, alert: RunAlert) -> None:
        """Rewrite an earlier alert to say how it was settled; its buttons go."""
        ...


@runtime_checkable
class LinkCardTaker(Protocol):
    """A publisher that shows a link card on a post with a link and no image."""

    takes_link_cards: bool


@runtime_checkable
class AttachmentTaker(Protocol):
    """A publisher that sends a post's images inside the post's own request (Discord's
    multipart message): no upload is its own effect, so the publication carries the
    images' bytes (`Publication.attachments`) and the post's receipt covers them."""

    takes_attachments: bool


@runtime_checkable
class ImageUploader(Protocol):
    """A publisher that can carry images (docs/design.md §32): each upload is its own
    effect, performed once per draft, target and image by `core/images/uploads.py`."""

    def upload_image(self, image: ImageBytes) -> UploadedMedia:
        """Upload once, no retries; raise EffectNotSent (known not uploaded) or
        EffectOutcomeUnknown."""
        ...


@runtime_checkable
class ContainerPublisher(Protocol):
    """A destination that publishes in two steps: a container made, then published."""

    def create_container(self, publication: Publication) -> str:
        """Make the container for `publication` (its text, its place in a thread); its
        id. Raise EffectNotSent or EffectOutcomeUnknown, as `publish` does."""
        ...

    def container_status(self, container_id: str) -> ContainerStatus:
        """The container's status now; EffectNotSent when it cannot be read."""
        ...
