"""Nothing is left that nothing will move, and nobody is told about (docs/design.md §12).

A failed draft is loud once and can be drafted again without a bump; a pending run no
one looks at is picked up or closed; a run stranded by the config, or a review post no
lookup can find, reaches people. Both backends; final state and what people were sent.
"""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from sqlmodel import col, select

from bot.alert_blocks import alert_message, settled_by_words
from core.api.galley import Galley
from core.api.services import Services
from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting.attempts import Backoff
from core.drafting_policies import DraftOutcome
from core.errors import EffectOutcomeUnknown, LookupUnavailable
from core.identity import CLI_ACTOR
from core.models import DraftRow, RunRow
from core.operations.alerts import AlertService
from core.policies import AlertKind, FailReason, SkipReason
from core.ports import BackpressureNotice, MessageRef, ReviewItem, RunAlert
from core.review.outbox import ReviewOutbox
from core.scheduling.dispatch import SlotDispatcher
from core.setup.config import Config
from core.states import DraftState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text, make_config
from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness import rows
from tests.harness.approvals import approve

RECIPE = "weekly-update"
SLOT = "2026-11-23T09:00"
RUN = f"{RECIPE}@{SLOT}"
QUICK = Backoff(base_seconds=0.01, cap_seconds=0.02)


class RecordingAlerter:
    def __init__(self) -> None:
        self.sent: list[RunAlert] = []
        self.settled: list[tuple[MessageRef, RunAlert]] = []

    def alert(self, alert: RunAlert) -> MessageRef:
        self.sent.append(alert)
        return MessageRef("C0ALERTS", f"{len(self.sent)}.0")

    def settle(self, ref: MessageRef, alert: RunAlert) -> None:
        self.settled.append((ref, alert))


def alerts_for(
    store: Store, config: Config, clock: FrozenClock
) -> tuple[AlertService, RecordingAlerter]:
    alerter = RecordingAlerter()
    service = AlertService(
        store, config, clock, EffectLedger(store, clock, "bot"), alerter, timedelta(hours=4)
    )
    return service, alerter


def run_row(store: Store, run_id: str = RUN) -> RunRow:
    return rows.run_row(store, run_id)


def refused_port() -> int:
    with socket.socket() as probe:  # bound, then closed: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def galley_with_the_model_down(config: Config, store: Store, clock: FrozenClock) -> Galley:
    """A Galley whose every model call is refused, retried quickly."""
    url = f"http://127.0.0.1:{refused_port()}"
    return Galley(config, store, drafter=AnthropicDrafter("k", url), clock=clock, backoff=QUICK)


# --- failed drafting ----------------------------------------------------------------------


def test_a_failed_draft_is_told_once_with_its_cause_and_retried_without_a_bump(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    clock = FrozenClock()
    config = make_config(max_attempts=2)
    down = galley_with_the_model_down(config, store, clock)
    up = Galley(config, store, drafter=AnthropicDrafter("k", fake_anthropic.url), clock=clock)
    waiting = up.draft(RECIPE, "2026-11-16T09:00")  # a draft people are reviewing meanwhile

    failed = down.draft(RECIPE, SLOT)

    assert (failed.outcome, failed.reason) == (DraftOutcome.FAILED, FailReason.ATTEMPTS_EXHAUSTED)
    assert failed.detail is not None and "connection refused" in failed.detail
    alerts, alerter = alerts_for(store, config, clock)
    alerts.sweep()
    alerts.sweep()  # once per episode, not once per pass or per attempt
    [alert] = alerter.sent
    assert alert.kind == AlertKind.DRAFTING
    assert alert.headline == "Drafting failed: connection refused to the Anthropic API."

    answer = up.retry(RUN, actor="U0ADMIN")

    assert "drafted" in answer
    assert alerts.settle_resolved() == 1  # the alert now says the run moved on
    assert alerts.settle_resolved() == 0
    [(ref, settled)] = alerter.settled
    assert ref.ts == "1.0" and settled.headline == f"Settled: run `{RUN}` is now awaiting_review."
    run = run_row(store)
    assert (run.state, run.version) == (RunState.AWAITING_REVIEW, 1)  # no bump needed
    with store.transaction() as session:
        other = session.exec(select(DraftRow).where(col(DraftRow.key) == waiting.key)).one()
    assert other.state == DraftState.READY  # nothing else was superseded
    assert len(fake_anthropic.requests) == 2


def test_a_settled_alert_names_the_person_who_retried_not_the_command_line_that_drafted(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    """Drafted from the command line, failed, retried by a person's click: the settled
    alert says that person moved it on (the retry's history names them), never "cli"."""
    clock = FrozenClock()
    config = make_config(max_attempts=1)
    down = galley_with_the_model_down(config, store, clock)
    up = Galley(config, store, drafter=AnthropicDrafter("k", fake_anthropic.url), clock=clock)
    assert down.draft(RECIPE, SLOT).outcome == DraftOutcome.FAILED  # actor: the CLI
    alerts, alerter = alerts_for(store, config, clock)
    alerts.sweep()

    up.retry(RUN, actor="U0ADMIN")

    assert alerts.settle_resolved() == 1
    [(_, settled)] = alerter.settled
    assert settled.settled_by == "U0ADMIN"
    rendered = str(alert_message(settled, actionable=False)["blocks"])
    assert "Settled by <@U0ADMIN>" in rendered and "cli" not in rendered


def test_each_surface_says_which_model_calls_it_counts_and_they_agree(store: Store) -> None:
    """Failed, retried, failed again: the failure counts this draft's calls against
    max_attempts; the alert and `runs` count every call of the run, by one definition."""
    clock = FrozenClock()
    config = make_config(max_attempts=2)
    down = galley_with_the_model_down(config, store, clock)
    down.draft(RECIPE, SLOT)
    again = down.retry(RUN, actor="U0ADMIN")

    assert "2 model calls for this draft (max_attempts), no draft" in again
    alerts, alerter = alerts_for(store, config, clock)
    alerts.sweep()
    [alert] = alerter.sent
    assert "Model calls for this run, every draft and retry: 4." in " ".join(alert.facts)
    [run] = down.runs()
    assert run.attempts == 4  # shown as "model calls" by `galley runs`


def test_who_settled_an_alert_is_said_in_words() -> None:
    assert settled_by_words(CLI_ACTOR) == "Settled from the command line"
    assert settled_by_words("U0ADMIN") == "Settled by <@U0ADMIN>"
    assert settled_by_words("") == "Settled by Galley"


def test_a_failed_draft_can_be_skipped_by_a_person(store: Store) -> None:
    clock = FrozenClock()
    config = make_config(max_attempts=1)
    down = galley_with_the_model_down(config, store, clock)
    assert down.draft(RECIPE, SLOT).outcome == DraftOutcome.FAILED

    assert "skipped" in down.skip(RUN, actor="U0ADMIN")
    assert run_row(store).state == RunState.SKIPPED
    assert "not failed" in down.skip(RUN, actor="U0ADMIN")


# --- pending runs nothing looks at ---------------------------------------------------------


def dispatcher_for(services: Services, config: Config) -> SlotDispatcher:
    return SlotDispatcher(
        services.store, services.drafting, services.clock, recipes=dict(config.recipes)
    )


def test_a_bumped_run_left_pending_is_drafted_at_the_new_version(store: Store) -> None:
    clock = FrozenClock()
    config = make_config()
    services = Services(config, store, drafter=InstantDrafter(), clock=clock)
    galley = Galley.over(services)
    galley.draft(RECIPE, SLOT)
    galley.bump(RECIPE, actor="U0ADMIN")
    assert run_row(store).state == RunState.PENDING
    dispatcher = dispatcher_for(services, config)
    assert dispatcher.stale_pending_runs() == []  # just moved: not stale yet

    clock.advance(timedelta(minutes=2))
    [stale] = dispatcher.stale_pending_runs()
    result = dispatcher.settle_pending(stale)

    assert result is not None and result.key == f"linkedin|{RUN}|v2"
    assert result.outcome == DraftOutcome.DRAFTED  # days past misfire_grace: a person asked
    assert run_row(store).state == RunState.AWAITING_REVIEW


def test_a_pending_run_past_grace_or_without_its_recipe_is_closed_with_a_reason(
    store: Store,
) -> None:
    clock = FrozenClock()
    config = make_config()
    services = Services(config, store, drafter=InstantDrafter(), clock=clock)
    from core.drafting.claims import ensure_recipe_row, open_run

    with store.transaction() as session:  # a crash left two runs pending
        ensure_recipe_row(session, RECIPE, clock.now())
        for wall in ("2026-11-16T09:00", SLOT):
            slot = services.resolve_slot(services.recipe(RECIPE), wall)
            open_run(
                session, services.recipe(RECIPE), slot, manual=False, actor="t", now=clock.now()
            )
    clock.advance(timedelta(minutes=2))
    dispatcher = dispatcher_for(services, config)
    removed = dispatcher_for(services, parse_without_recipe())

    late = dispatcher.settle_pending(f"{RECIPE}@2026-11-16T09:00")
    gone = removed.settle_pending(RUN)

    assert late is not None and (late.outcome, late.reason) == (
        DraftOutcome.SKIPPED,
        SkipReason.MISFIRE,
    )
    assert gone is not None and gone.reason == SkipReason.RECIPE_REMOVED
    assert run_row(store).state == RunState.SKIPPED
    assert dispatcher.stale_pending_runs() == []


def parse_without_recipe() -> Config:
    from core.setup.config import parse_config

    text = config_text().replace('name = "weekly-update"', 'name = "another-recipe"')
    return parse_config(text)


# --- stranded runs and review posts nobody can find ----------------------------------------


def test_an_approved_run_whose_recipe_left_the_config_alerts_people(store: Store) -> None:
    clock = FrozenClock()
    config = make_config()
    galley = Galley(config, store, drafter=InstantDrafter(), clock=clock)
    key = galley.draft(RECIPE, SLOT).key
    assert key is not None
    publishing = parse_with_publish()
    answer = approve(store, publishing, clock, key)
    assert answer.accepted and run_row(store).state == RunState.APPROVED

    alerts, alerter = alerts_for(store, config, clock)  # the publish target was removed
    alerts.sweep()
    alerts.sweep()

    [alert] = alerter.sent
    assert alert.kind == AlertKind.STRANDED
    assert "nothing will publish it" in alert.headline


def parse_with_publish() -> Config:
    from core.setup.config import parse_config

    text = config_text().replace(
        'prompt = "Write',
        'publish = { to = "webhook", url = "http://127.0.0.1:9/h" }\nprompt = "Write',
    )
    return parse_config(text)


class UnfindableSurface:
    """A review surface whose post times out and whose history cannot be searched."""

    def __init__(self) -> None:
        self.posts = 0

    def post_review(self, item: ReviewItem) -> MessageRef:
        self.posts += 1
        raise EffectOutcomeUnknown("read timeout after the post was sent")

    def find_review(self, draft_key: str) -> MessageRef | None:
        raise LookupUnavailable("not in the newest 1000 messages")

    def update_review(self, ref: MessageRef, item: ReviewItem) -> None:
        return None

    def announce(self, notice: BackpressureNotice) -> MessageRef:
        return MessageRef("C0REVIEW", "1.0")


@pytest.mark.parametrize("passes", [3])
def test_a_review_post_nobody_can_find_alerts_people_once(store: Store, passes: int) -> None:
    clock = FrozenClock()
    config = make_config()
    galley = Galley(config, store, drafter=InstantDrafter(), clock=clock)
    galley.draft(RECIPE, SLOT)
    alerts, alerter = alerts_for(store, config, clock)
    surface = UnfindableSurface()
    outbox = ReviewOutbox(
        store,
        EffectLedger(store, clock, "bot"),
        surface,
        channel="C0REVIEW",
        call_lease=timedelta(seconds=4),
        unfindable=alerts.alert_review_post,
    )

    for _ in range(passes):
        outbox.post_ready_drafts()

    assert surface.posts == 1  # never re-sent blind
    [alert] = alerter.sent
    assert alert.kind == AlertKind.REVIEW_POST
    assert any("not in the newest 1000 messages" in fact for fact in alert.facts)
