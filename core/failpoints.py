"""Named points where tests crash a process or force an interleaving (docs/design.md §20).

With `GALLEY_FAILPOINT=<name>` set, reaching `failpoint("<name>")` ends the process at
once with `os._exit`: no cleanup, no commit, no finally blocks, as a crash would.
In-process, a test can `hook("<name>", fn)` to run `fn` right there (for example another
transaction between a read and the write that depends on it). In production neither is
set and a failpoint costs one environment lookup and one dictionary lookup.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum

FAILPOINT_EXIT_CODE = 86


class Failpoint(StrEnum):
    """Every point a test may name, in the order a slot meets them."""

    AFTER_POLL_COMMIT = "after_poll_commit"  # an items poll's new runs stored, none claimed
    AFTER_CLAIM_COMMIT = "after_claim_commit"
    # an undated item's sighting read, not yet moved to this run (docs/design.md §27)
    SEEN_ITEM_READ = "seen_item_read"
    AFTER_SNAPSHOT_COMMIT = (
        "after_snapshot_commit"  # a run's sources read and stored (docs/design.md §27)
    )
    ATTEMPT_NUMBER_READ = "attempt_number_read"  # a call's number read, its row not written
    AFTER_MODEL_REPLY = "after_model_reply"
    BATCH_GATHER_READ = "batch_gather_read"  # unsent entries read, not yet tied to a batch
    AFTER_BATCH_CREATE = "after_batch_create"  # the batch exists; its id is not stored yet
    BATCH_LATE_READ = "batch_late_read"  # entries past their wait read, not yet taken over
    AFTER_DRAFT_COMMIT = "after_draft_commit"
    BEFORE_REVIEW_POST = "before_review_post"
    AFTER_REVIEW_POST = "after_review_post"
    # the review message's receipt stored; the alt text of its source images not asked yet
    AFTER_REVIEW_RECORDED = "after_review_recorded"
    AFTER_APPROVAL_COUNTED = "after_approval_counted"
    REMINDERS_DUE_READ = "reminders_due_read"  # waiting drafts read, no reminder begun yet
    AFTER_REDRAFT_REPLY = "after_redraft_reply"
    AFTER_REDRAFT_COMMIT = "after_redraft_commit"
    UNAPPROVE_READ = "unapprove_read"
    PUBLISH_START_READ = "publish_start_read"
    AFTER_PUBLISHING_COMMIT = "after_publishing_commit"
    BEFORE_PUBLISH_CALL = "before_publish_call"
    AFTER_IMAGE_UPLOADS = "after_image_uploads"  # every image uploaded, the post not sent
    AFTER_PUBLISH_CALL = "after_publish_call"
    ORPHAN_NOTED = "orphan_noted"
    SWEEPER_AFTER_READ = "sweeper_after_read"
    BUMP_AFTER_READ = "bump_after_read"
    MISSED_AFTER_READ = "missed_after_read"  # missed drafts read, not yet locked
    READINGS_DUE_READ = (
        "readings_due_read"  # posts due read back, not yet claimed (docs/design.md §28)
    )
    # one post's counts about to be written (docs/design.md §28)
    READING_KEEP = "reading_keep"


_hooks: dict[str, Callable[[], None]] = {}
_hooks_lock = threading.Lock()


def failpoint(name: Failpoint) -> None:
    if os.environ.get("GALLEY_FAILPOINT") == name:
        sys.stderr.write(f"galley: failpoint {name} reached, exiting\n")
        sys.stderr.flush()
        os._exit(FAILPOINT_EXIT_CODE)
    hooked = _hooks.get(name)
    if hooked is not None:
        hooked()


@contextmanager
def hook(name: Failpoint | str, action: Callable[[], None]) -> Iterator[None]:
    """Run `action` each time `failpoint(name)` is reached inside the `with` block. A name
    that is no `Failpoint` raises ValueError: a misspelt hook would never run."""
    name = Failpoint(name)
    with _hooks_lock:
        _hooks[name] = action
    try:
        yield
    finally:
        with _hooks_lock:
            _hooks.pop(name, None)
