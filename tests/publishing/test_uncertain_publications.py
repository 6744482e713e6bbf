"""A publication whose outcome is unknown ends published once or in front of a person,
never sent twice unasked (docs/design.md §9 and §12): with a status URL the next pass
settles it; without one the run is `uncertain`, alerted once, and people mark it
published, retry it exactly once more, or cancel it (which lists what was completed).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from bot.alert_blocks import PUBLISH_EVENT_TYPE
from bot.slack_surface import SlackReviewSurface
from core.failpoints import hook
from core.operations.resolution import Resolver
from core.policies import Finding, PublishOutcome
from core.review.outbox import ReviewOutbox
from core.states import DraftState, EffectState, RunState
from tests.fakes import slack_api
from tests.fakes.webhook import Action, accept_then_drop, accept_then_hang, drop, status
from tests.harness.slack_harness import eventually
from tests.harness.worlds import (
    ANNOUNCE,
    HANG,
    HOOK_KEY,
    KEY,
    MENTIONS,
    REVIEW,
    RUN,
    SLACK_KEY,
    Crash,
    HeldPublisher,
    MakeWorld,
)

# --- 1b. interrupted during the call --------------------------------------------------------


def test_accepted_then_hung_without_status_url_is_uncertain_alerted_once_and_marked_published(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, target="webhook-no-status")
    result = w.go_uncertain()

    assert w.posts() == 1
    assert list(w.hook.publications) == [HOOK_KEY]
    assert w.run_row().state == RunState.UNCERTAIN
    effect = w.effect()
    assert effect is not None and effect.state == EffectState.UNCERTAIN
    assert result.detail and "no complete answer" in result.detail

    [alert] = w.alert_messages()
    shown = alert["text"] + " " + str(alert["blocks"])
    assert RUN in shown
    for mention in MENTIONS:
        assert mention in shown
    [actions] = [b for b in alert["blocks"] if b["type"] == "actions"]
    labels = [e["text"]["text"] for e in actions["elements"]]
    assert labels == ["Mark published", "Retry", "Cancel"]

    # Further passes cannot look (no status_url) and never send again, nor ping again.
    again = w.service("w2").publish_pending()
    assert [r.outcome for r in again] == [PublishOutcome.UNCERTAIN]
    assert w.alerts().sweep() == 0
    assert w.alerts("w2").sweep() == 0
    assert w.posts() == 1
    assert len(w.alert_messages()) == 1

    said = w.resolver().resolve(RUN, Finding.PUBLISHED, actor="U0ADMIN")
    assert "marked published" in said

    run = w.run_row()
    assert run.state == RunState.SUCCEEDED
    assert w.draft_row().state == DraftState.PUBLISHED
    effect = w.effect()
    assert effect is not None
    assert (effect.state, effect.external_id) == (EffectState.SUCCEEDED, "manual:U0ADMIN")
    assert w.service().publish_pending() == []
    assert w.alerts().sweep() == 0
    assert w.posts() == 1
    assert len(w.hook.publications) == 1
    assert len(w.alert_messages()) == 1


@pytest.mark.parametrize(
    ("fault", "posts", "tries"),
    [
        pytest.param(accept_then_hang(HANG), 1, 1, id="accept_then_hang"),
        pytest.param(accept_then_drop(), 1, 1, id="accept_then_drop"),
        pytest.param(drop(), 2, 2, id="drop_before_acting"),
    ],
)
def test_an_unknown_outcome_with_status_url_is_settled_by_the_next_pass(
    worlds: MakeWorld, db_url: str, fault: Action, posts: int, tries: int
) -> None:
    w = worlds(db_url)
    w.go_uncertain(fault)
    assert w.run_row().state == RunState.UNCERTAIN
    assert len(w.alert_messages()) == 1

    results = w.service("w2").publish_pending()

    assert [r.outcome for r in results] == [PublishOutcome.PUBLISHED]
    assert w.posts() == posts  # a POST dropped before acting is sent once more
    assert list(w.hook.publications) == [HOOK_KEY]
    [effect] = w.publish_effects()
    assert (effect.state, effect.external_id, effect.tries) == (
        EffectState.SUCCEEDED,
        "pub_1",
        tries,
    )
    assert w.run_row().state == RunState.SUCCEEDED
    assert w.draft_row().state == DraftState.PUBLISHED
    assert w.service().publish_pending() == []
    assert w.alerts().sweep() == 0
    assert w.posts() == posts


def test_a_slack_publication_whose_answer_never_came_is_found_by_its_metadata(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, target="slack")
    w.approved()
    w.slack.script("chat.postMessage", slack_api.accept_then_hang(HANG))

    first = w.service().publish_run(RUN)
    second = w.service("w2").publish_pending()

    assert first.outcome == PublishOutcome.UNCERTAIN
    assert [r.outcome for r in second] == [PublishOutcome.PUBLISHED]
    [message] = w.announced()
    assert message["metadata"]["event_type"] == PUBLISH_EVENT_TYPE
    assert message["metadata"]["event_payload"]["effect_key"] == SLACK_KEY
    assert (
        len([c for c in w.slack.calls("chat.postMessage") if c.params["channel"] == ANNOUNCE]) == 1
    )
    effect = w.effect(SLACK_KEY)
    assert effect is not None and effect.external_id == message["ts"]
    assert w.run_row().state == RunState.SUCCEEDED


# --- 3. people settle an uncertain run ------------------------------------------------------


@pytest.mark.parametrize("how", ["retry", "absent"])
def test_retry_of_an_uncertain_run_sends_exactly_once_more(
    worlds: MakeWorld, db_url: str, how: str
) -> None:
    w = worlds(db_url, target="webhook-no-status")
    w.go_uncertain()
    assert w.posts() == 1

    if how == "retry":
        said = w.resolver().retry(RUN, actor="U0ADMIN")
    else:
        said = w.resolver().resolve(RUN, Finding.ABSENT, actor="U0ADMIN")
    assert "once more" in said
    assert w.run_row().state == RunState.PUBLISHING

    results = w.service("w2").publish_pending()

    assert [r.outcome for r in results] == [PublishOutcome.PUBLISHED]
    assert w.posts() == 2  # the person accepted the risk of a repeat: one more POST
    assert len(w.hook.publications) == 1  # the destination dedupes by Idempotency-Key
    [effect] = w.publish_effects()
    assert (effect.state, effect.tries, effect.external_id) == (EffectState.SUCCEEDED, 2, "pub_1")
    assert w.run_row().state == RunState.SUCCEEDED
    assert w.service().publish_pending() == []
    assert w.posts() == 2
    assert len(w.alert_messages()) == 1


def test_a_run_cancelled_after_a_retry_before_the_pass_looked_keeps_its_send_in_question(
    worlds: MakeWorld, db_url: str
) -> None:
    """The retry reopens the receipt, then a person cancels before any pass acts: the
    first send may have landed (here it did), so the cancel lists it as unknown, the
    receipt is uncertain again and the draft stays approved, never `cancelled` while
    its post may be public; nothing is sent again."""
    w = worlds(db_url, target="webhook-no-status")
    w.go_uncertain()
    assert list(w.hook.publications) == [HOOK_KEY]  # the first send did land
    assert "once more" in w.resolver().retry(RUN, actor="U0ADMIN")

    said = w.resolver().cancel(RUN, actor="U0ADMIN")

    assert f"Sent, outcome unknown: {HOOK_KEY}" in said
    assert w.run_row().state == RunState.CANCELLED
    effect = w.effect()
    assert effect is not None and effect.state == EffectState.UNCERTAIN
    assert w.draft_row().state == DraftState.APPROVED
    w.service("w2").publish_pending()
    assert w.posts() == 1


def test_retry_clicked_twice_at_once_sends_only_once_more(worlds: MakeWorld, db_url: str) -> None:
    w = worlds(db_url, target="webhook-no-status")
    w.go_uncertain()
    barrier = threading.Barrier(2)

    def click(actor: str) -> str:
        barrier.wait()
        return Resolver(w.store, w.config, w.clock).retry(RUN, actor=actor)

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(click, ["U0ADMIN", "U0B"]))
    release = threading.Event()
    held = w.service("w-c", publisher=HeldPublisher(w.publisher(w.recipe), release))
    with ThreadPoolExecutor(1) as pool:
        publishing = pool.submit(held.publish_run, RUN)
        eventually(
            lambda: (e := w.effect()) is not None and e.state == EffectState.IN_FLIGHT,
            "the retry's publish to be in flight",
        )
        late = Resolver(w.store, w.config, w.clock).retry(RUN, actor="U0C")  # a third click
        release.set()
        publishing.result(timeout=15)
    w.service().publish_pending()

    assert sum("once more" in a for a in answers) == 1  # one click re-opened it
    assert "not uncertain" in late
    assert w.posts() == 2  # the first POST, and exactly one more for the retry
    assert w.run_row().state == RunState.SUCCEEDED


# --- 5. cancel ------------------------------------------------------------------------------


def test_cancelling_an_uncertain_run_lists_completed_effects_and_sends_nothing_more(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url, target="webhook-no-status")
    w.draft()
    outbox = ReviewOutbox(
        w.store,
        w.ledger(),
        SlackReviewSurface(w.channels, REVIEW),
        channel=REVIEW,
        call_lease=timedelta(seconds=4),
    )
    assert outbox.post_ready_drafts() == 1
    [review] = w.slack.messages(REVIEW)
    assert w.approve().accepted
    w.hook.script_post(accept_then_hang(HANG))
    assert w.service().publish_run(RUN).outcome == PublishOutcome.UNCERTAIN

    said = w.resolver().cancel(RUN, actor="U0ADMIN")

    run = w.run_row()
    assert run.state == RunState.CANCELLED
    assert run.reason is not None
    assert f"{KEY}|review → {review['ts']}" in run.reason
    assert "publish" not in run.reason  # its outcome is unknown: not listed as completed
    assert f"{KEY}|review" in said
    assert w.service().publish_pending() == []
    assert "not uncertain" in w.resolver().retry(RUN, actor="U0ADMIN")
    assert "nothing to settle" in w.resolver().resolve(RUN, Finding.ABSENT, actor="U0ADMIN")
    assert w.service().publish_run(RUN).outcome == PublishOutcome.NOT_READY
    w.clock.advance(timedelta(hours=5))
    assert w.alerts().sweep() == 0
    assert w.posts() == 1
    assert len(w.alert_messages()) == 1


@pytest.mark.parametrize(
    ("fault", "found"),
    [
        pytest.param(accept_then_hang(HANG), True, id="it_went_out"),
        pytest.param(drop(), False, id="it_never_arrived"),
    ],
)
def test_a_run_cancelled_while_its_send_is_uncertain_learns_what_became_of_the_send(
    worlds: MakeWorld, db_url: str, fault: Action, found: bool
) -> None:
    """Cancel stops further sends; the unknown one is still looked up (never repeated),
    so the run's list of completed effects says what really left the building."""
    w = worlds(db_url)
    w.go_uncertain(fault)
    w.hook.script_status(status(500))  # the destination cannot answer at the moment

    said = w.resolver().cancel(RUN, actor="U0ADMIN")
    assert HOOK_KEY in said and "unknown" in said
    w.service("w2").publish_pending()  # cannot tell yet: nothing changes
    assert (w.run_row().state, w.effect().state) == (RunState.CANCELLED, EffectState.UNCERTAIN)

    w.service("w2").publish_pending()  # the destination answers now

    run, effect = w.run_row(), w.effect()
    assert w.posts() == 1  # looked up, never sent again
    assert run.state == RunState.CANCELLED and run.reason is not None
    assert effect is not None
    if found:
        assert (effect.state, effect.external_id) == (EffectState.SUCCEEDED, "pub_1")
        assert w.draft_row().state == DraftState.PUBLISHED
        assert f"completed after cancellation: publish {KEY} → pub_1" in run.reason
    else:
        assert effect.state == EffectState.FAILED
        assert w.draft_row().state == DraftState.APPROVED
        assert f"not sent: publish {KEY}" in run.reason
    events = w.events()
    w.service().publish_pending()
    assert (w.events(), w.posts()) == (events, 1)  # settled once, for good


def test_a_send_that_times_out_after_its_run_was_cancelled_is_listed_once_known(
    worlds: MakeWorld, db_url: str
) -> None:
    """Cancel during the send promises the outcome "once known": a send whose answer
    never comes is known only by looking, which the next pass does."""
    w = worlds(db_url)
    w.approved()
    w.hook.script_post(accept_then_hang(HANG))
    with ThreadPoolExecutor(1) as pool:
        publishing = pool.submit(w.service().publish_run, RUN)
        eventually(lambda: w.posts() == 1, "the POST to reach the webhook")
        said = w.resolver().cancel(RUN, actor="U0ADMIN")
        assert publishing.result(timeout=15).outcome == PublishOutcome.UNCERTAIN
    assert "in flight" in said and HOOK_KEY in said
    assert w.run_row().state == RunState.CANCELLED

    w.service("w2").publish_pending()

    run = w.run_row()
    assert run.reason is not None and f"publish {KEY} → pub_1" in run.reason
    assert w.draft_row().state == DraftState.PUBLISHED
    assert w.posts() == 1


def test_a_pass_that_dies_before_settling_an_orphaned_send_lists_it_once(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    w.go_uncertain()
    w.resolver().cancel(RUN, actor="U0ADMIN")
    with hook("orphan_noted", crash), pytest.raises(Crash):  # between its two writes
        w.service("w2").publish_pending()
    w.clock.advance(timedelta(minutes=1))  # the dead pass's hold on the receipt lapses

    w.service("w3").publish_pending()

    run, effect = w.run_row(), w.effect()
    assert effect is not None and effect.state == EffectState.SUCCEEDED
    assert run.reason is not None and run.reason.count(f"publish {KEY} → pub_1") == 1
    assert w.draft_row().state == DraftState.PUBLISHED
    assert w.posts() == 1


def crash() -> None:
    raise Crash


class SkewedReplicaClock:
    """A replica whose clock runs an hour behind the database's (it judges no leases)."""

    def now(self) -> datetime:
        return datetime.now(UTC) - timedelta(hours=1)


def test_receipts_a_person_settles_are_stamped_by_the_databases_clock_not_the_replicas(
    worlds: MakeWorld, db_url: str
) -> None:
    """Every other receipt is stamped by the database's clock, and the passes that read
    them (the take-up of published posts, the orphan pass) compare with it."""
    world = worlds(db_url)
    world.go_uncertain(accept_then_drop())
    Resolver(world.store, world.config, SkewedReplicaClock()).resolve(
        RUN, Finding.PUBLISHED, actor="U0ADMIN"
    )
    effect = world.effect()
    assert effect is not None and effect.state == EffectState.SUCCEEDED
    assert abs(effect.updated_at - datetime.now(UTC)) < timedelta(minutes=5)
