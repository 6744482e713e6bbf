"""Every policy, reason and choice Galley records or is configured with, as enums;
drafting's own (a model call's outcome and cause, batches, similarity, what a draft
learns from) are in `drafting_policies.py` beside it.

The value of each member is what is written in the database, in `--json` output, in
Slack messages and in log lines: one spelling everywhere.
"""

from __future__ import annotations

from enum import StrEnum


class Overlap(StrEnum):
    """What a recipe does when a slot fires while its previous run still works."""

    SKIP = "skip"
    QUEUE_ONE = "queue_one"


class DstGap(StrEnum):
    """What to do with a wall-clock slot that does not exist (spring forward)."""

    SHIFT = "shift"
    SKIP = "skip"


class DstRepeat(StrEnum):
    """What to do with a wall-clock slot that happens twice (fall back)."""

    FIRST = "first"
    BOTH = "both"


class DstNote(StrEnum):
    """How DST touched a slot; None on the slot when it did not."""

    # The wall time does not exist (spring forward); under dst_gap=shift the slot fires
    # at the first instant after the gap, i.e. the transition itself: 01:30 in London on
    # 2026-03-29 fires at 02:00 BST (01:00 UTC), 02:15 on Lord Howe on 2026-10-04 at
    # 02:30 +11. (zoneinfo's fold=0 reading would instead be one gap-length later.)
    GAP_SHIFTED = "gap_shifted"
    REPEATED_FIRST = "repeated_first"  # wall time happens twice; this is the first pass
    REPEATED_SECOND = "repeated_second"  # the second pass, only under dst_repeat=both


class Role(StrEnum):
    APPROVER = "approver"  # approve, reject, edit drafts
    ADMIN = "admin"  # run, bump, pause, resume, resolve, retry, cancel


class SkipReason(StrEnum):
    BACKPRESSURE = "backpressure"
    PAUSED = "paused"
    OVERLAP = "overlap"
    MISFIRE = "misfire"
    BUDGET = "budget"
    RECIPE_REMOVED = "recipe_removed"  # a pending run whose recipe left the config
    NO_NEWS = "no_news"  # its sources had nothing in the window (on_empty = "skip")
    BACKFILL = "backfill"  # an item already there at its source's first poll (docs/design.md §29)
    STALE_ITEM = "stale_item"  # an item that waited on backpressure past item_ttl


class PendingReason(StrEnum):
    """Why a run is pending (or running again) with no draft of its own yet: `runs.reason`.
    The values are the words stored before they were an enum, so older rows still read."""

    QUEUED = "queued"  # overlap = queue_one: waits for the recipe's running draft
    CLAIM_EXPIRED = "claim expired"  # its holder stopped renewing; the sweeper gave it back
    CLAIM_TAKEN_OVER = "claim taken over"  # running again, under the claim's new holder
    ITEM_WAITS = "item waits"  # an item's run waiting its turn, oldest first (docs/design.md §29)


TAKEOVER_NOTE = "took over an expired claim of"  # a draft's event when its claim changes hands


def takeover_note(previous: str | None) -> str:
    return f"{TAKEOVER_NOTE} {previous}"


def is_takeover_note(reason: str | None) -> bool:
    return (reason or "").startswith(TAKEOVER_NOTE)


class FailReason(StrEnum):
    INVALID_REQUEST = "invalid_request"
    AUTH = "auth"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    EMPTY_RESPONSE = "empty_response"
    PUBLISH_REJECTED = "publish_rejected"  # the destination refused the publication itself
    PUBLISH_AUTH = "publish_auth"  # the destination refused Galley's credentials
    # docs/design.md §23: approved, and not published by slot + publish_late
    MISSED_SLOT = "missed_slot"
    SOURCE_FAILED = "source_failed"  # a required source answered 401/403/404 or kept failing

    @property
    def while_drafting(self) -> bool:
        """The run failed before it had a draft: `galley retry` drafts it again."""
        return self not in (
            FailReason.PUBLISH_REJECTED,
            FailReason.PUBLISH_AUTH,
            FailReason.MISSED_SLOT,
        )


class ExpiryReason(StrEnum):
    """Why a draft nobody approved expired (the run's reason)."""

    MISSED_SLOT = "missed_slot"  # docs/design.md §23: not approved by its slot plus publish_late


class EffectDecision(StrEnum):
    """What `EffectLedger.begin` decided for one effect key."""

    ACT = "act"  # you hold the in-flight receipt: perform the effect once, under this key
    DONE = "done"  # it already happened: here is the recorded result
    RECONCILE = "reconcile"  # it may have happened: ask the destination before acting
    WAIT = "wait"  # it was refused with a time to wait (Retry-After) that has not passed


class EffectOutcome(StrEnum):
    """What `EffectLedger.perform` came to for one effect key."""

    DONE = "done"  # it had already happened: the recorded result
    FOUND = "found"  # the destination had it (a lost answer, a restored database)
    SENT = "sent"  # performed now, once
    IN_PROGRESS = "in_progress"  # another holder has it, or its call may still be on the wire
    WAITING = "waiting"  # refused earlier with a time to wait that has not passed
    REFUSED = "refused"  # the last check before the call said it may no longer happen
    NOT_SENT = "not_sent"  # the destination refused it; known not to have happened
    UNCERTAIN = "uncertain"  # sent, outcome unknown: looked up before any retry
    CANNOT_TELL = "cannot_tell"  # a lookup of an uncertain effect could not answer
    LEASE_LOST = "lease_lost"  # our receipt was taken over before the call: nothing sent

    @property
    def happened(self) -> bool:
        return self in (EffectOutcome.DONE, EffectOutcome.FOUND, EffectOutcome.SENT)


class EffectStep(StrEnum):
    """What an effect receipt is for, as `effects.step` stores it (the key says it too,
    but code reads the stored step, never the key)."""

    REVIEW = "review"  # a draft's review message posted
    REVIEW_UPDATE = "review-update"  # a review message rewritten to show its draft's state
    NOTICE = "notice"  # a backpressure notice: drafting paused, or resumed
    PUBLISH = "publish"  # one publication to one target
    ALERT = "alert"  # an alert about a run, or a reminder of one
    ALERT_SETTLED = "alert-settled"  # an alert rewritten to say how its run was settled
    DIGEST = "digest"  # the daily operations digest
    REPORT = "report"  # the weekly report (docs/design.md §38)
    REMINDER = (
        "reminder"  # a waiting draft announced again in its review thread (docs/design.md §35)
    )
    UPLOAD = "upload"  # one image's bytes uploaded to one target (docs/design.md §32)
    CREDENTIAL_CHECK = "credential-check"  # a target's credentials proved before a slot
    CONTAINER = "container"  # a Threads media container made, before it is published


class Verdict(StrEnum):
    """What a person decides about one revision of a draft."""

    APPROVED = "approved"
    REJECTED = "rejected"


class DecisionKind(StrEnum):
    """What a person did to a draft or a run that the decision log keeps (`events.decision`,
    docs/design.md §35): the event row of that act is its one record."""

    APPROVAL = "approval"  # one approval counted; the one that decides moves the draft
    REJECTION = "rejection"
    EDIT = "edit"
    REDRAFT = "redraft"  # a redraft asked for with a note
    UNAPPROVE = "unapprove"
    RESOLUTION = "resolution"  # an uncertain or failed run settled, retried, skipped, cancelled
    POST = "post"  # a person wrote the post itself (docs/design.md §37): its first revision


class Refusal(StrEnum):
    """Why a click on a draft (approve, reject, edit) did not count."""

    NOT_APPROVER = "not_approver"
    EMPTY_EDIT = "empty_edit"
    GONE = "gone"  # no such draft
    DECIDED = "decided"  # approved, rejected or published already
    NOT_DECIDABLE = "not_decidable"  # expired, superseded, not drafted yet
    EDITED = "edited"  # the click names an older revision
    BUMPED = "bumped"  # the recipe's version moved on
    WINDOW_PASSED = "window_passed"  # the review window closed
    CANCELLED = "cancelled"  # its run was cancelled
    # the reviewer's loop (docs/design.md §22)
    ALREADY_APPROVED = "already_approved"  # this person's approval of this revision counts already
    EDITOR_MAY_NOT_APPROVE = "editor_may_not_approve"  # editor_may_approve = false
    EMPTY_NOTE = "empty_note"  # a redraft needs a note saying what to change
    REDRAFTING = "redrafting"  # this revision's redraft was asked for already
    REDRAFT_LIMIT = "redraft_limit"  # max_redrafts reached
    ATTEMPT_LIMIT = "attempt_limit"  # max_attempts model calls made for this draft
    BUDGET = "budget"  # the recipe's daily_token_budget is spent
    NOT_APPROVED = "not_approved"  # Unapprove on a draft that is not approved
    PUBLISHING_STARTED = "publishing_started"  # Unapprove too late: it goes out as approved
    DOES_NOT_FIT = "does_not_fit"  # too long for one of its targets: edit or redraft it
    MISSED_SLOT = "missed_slot"  # drafting ahead: past its slot plus publish_late
    TEXT_FROZEN = "text_frozen"  # a target has it, or may: edit and redraft wait on that
    STAGE_WAITING = "stage_waiting"  # an approver of another stage: the current one waits


class FollowUp(StrEnum):
    """What a decision sets going."""

    NONE = "none"
    PUBLISH = "publish"  # an approval of a recipe with a publish target


class Backpressure(StrEnum):
    """A backpressure notice: drafting of a recipe stopped for people, or started again."""

    PAUSED = "paused"
    RESUMED = "resumed"


class PublishOutcome(StrEnum):
    PUBLISHED = "published"  # published now, or found at the destination
    SENT_BACK = "sent_back"  # the approval was too old: back to review
    UNCERTAIN = "uncertain"  # cannot tell whether it happened: people are asked
    WAITING = "waiting"  # refused for now (429, unreachable): tried again later
    FAILED = "failed"  # the destination refused the publication itself
    IN_PROGRESS = "in_progress"  # another worker is publishing it right now
    NOT_READY = "not_ready"  # nothing to publish for this run


class ThreadStyle(StrEnum):
    """How a destination publishes a thread (docs/design.md §31): the whole thread in one
    call (Bluesky's applyWrites: all parts or none), or part after part, each its own
    effect replying to the one before (Mastodon, a Slack channel)."""

    ONE_CALL = "one_call"
    PART_BY_PART = "part_by_part"


class Finding(StrEnum):
    """What a person found at the destination of an uncertain publication."""

    PUBLISHED = "published"
    ABSENT = "absent"


class AlertKind(StrEnum):
    """What an alert asks people to settle; it decides the buttons it carries."""

    PUBLISH = "publish"  # uncertain or stuck publication: Mark published / Retry / Cancel
    DRAFTING = "drafting"  # failed or stuck drafting: Retry draft / Skip
    REVIEW_POST = "review_post"  # a review post nobody can find: check the channel
    STRANDED = "stranded"  # a run nothing will move (its recipe left the config): Cancel
    MISSED = "missed"  # docs/design.md §23: approved, not published by its time: Retry / Cancel
    POST_GONE = "post_gone"  # docs/design.md §28: published, then gone when read back
    POLL_FAILING = "poll_failing"  # docs/design.md §29: an items recipe's source unreadable
    CREDENTIALS = "credentials"  # a target's credentials refused, or about to expire


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"  # one JSON object per line


class LogLevel(StrEnum):
    DEBUG = "debug"  # also shows the traceback behind an operator error
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class CalendarState(StrEnum):
    """A slot on the publication calendar (docs/design.md §23), as people read it; a run
    in any other state is shown by its own state's name (rejected, cancelled, …)."""

    NOT_DRAFTED = "not_drafted"  # no run yet, or one waiting to be drafted
    DRAFTING = "drafting"
    WAITING_FOR_REVIEW = "waiting_for_review"
    APPROVED = "approved"  # waiting for its publication time
    PUBLISHING = "publishing"  # under way, or its outcome being looked up
    PUBLISHED = "published"
    MISSED = "missed"  # its time passed without a publication (missed_slot, misfire)


class Trigger(StrEnum):
    """What makes a recipe's runs (docs/design.md §29): its slots, or each new item of its
    one `source`, polled at its slots."""

    SCHEDULE = "schedule"
    ITEMS = "items"


class ItemFate(StrEnum):
    """What a poll makes of an item it has not seen (docs/design.md §29)."""

    NEW = "new"  # a run, drafted in its turn
    BACKFILL = "backfill"  # there at its source's first poll: a run skipped (`backfill`)
    REISSUE = "reissue"  # a known item's link and title under a new id: no run


class PollOutcome(StrEnum):
    """How an items recipe's latest poll went (docs/design.md §29): its source read, or not."""

    READ = "read"  # the source answered: its items were recorded
    FAILED = "failed"  # the source could not be read (three tries): nothing recorded


class SourceKind(StrEnum):
    """What a recipe's source reads (docs/design.md §26)."""

    FEED = "feed"  # RSS or Atom
    GITHUB = "github"  # a repository's releases and merged pull requests
    SLACK = "slack"  # what people wrote in a channel the bot is in
    URL = "url"  # a page's main text
    FILE = "file"  # files beside the config, by glob


class GithubItems(StrEnum):
    RELEASES = "releases"
    MERGED_PULLS = "merged_pulls"


class PostCheck(StrEnum):
    """What reading a published post back found (docs/design.md §28)."""

    DUE = "due"  # not read back yet, or the read could not tell: read again, with backoff
    VERIFIED = "verified"  # found where it was published
    GONE = "gone"  # the platform says it is no longer there (deleted, removed)
    UNREADABLE = "unreadable"  # its target cannot be read back (no status URL, no scope)
    MARKED = "marked"  # a person marked it published: no post id is known, nothing is read
    UNCONFIRMED = "unconfirmed"  # no read told found or gone before its last reading's time


class ImageSource(StrEnum):
    """Where an image's bytes came from, as `images.source` stores it (docs/design.md §32)."""

    SLACK_FILE = "slack_file"  # a reviewer dropped it in the review message's thread
    FEED_ENCLOSURE = "feed_enclosure"  # a feed item's enclosure or media:content
    OG_IMAGE = "og_image"  # the linked page's OpenGraph image
    PLAN_FILE = "plan_file"  # a file beside an imported plan (docs/design.md §37)


class ImageProblem(StrEnum):
    """Why an image cannot go to a target as it is (docs/design.md §32)."""

    UNREADABLE = "unreadable"  # Pillow cannot open it: not an image, or a damaged one
    FORMAT = "format"  # a format the platform does not take, and it cannot be converted
    TOO_BIG = "too_big"  # over the platform's size even at the smallest legible size
    TOO_MANY = "too_many"  # more images than the platform takes on one post
    NO_ALT = "no_alt"  # no alt text yet: nobody may approve it


class FetchStop(StrEnum):
    """Which rule stopped a guarded read (docs/design.md §33), for a caller that words it
    its own way; most refusals name none."""

    OVER_CAP = "over_cap"  # the body passed its byte cap, on the wire or decoded
    DEADLINE = "deadline"  # no whole answer before the read's deadline
    REDIRECT = "redirect"  # a redirect answered where none is followed


class ContainerStatus(StrEnum):
    """A Threads media container's `status`, in Threads' own words."""

    IN_PROGRESS = "IN_PROGRESS"
    FINISHED = "FINISHED"  # ready to publish
    PUBLISHED = "PUBLISHED"
    EXPIRED = "EXPIRED"  # not published within 24 hours
    ERROR = "ERROR"
