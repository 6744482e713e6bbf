"""Alerts about uncertain runs (docs/design.md §12): reminded once per `alert_reminder`
while unresolved, by one replica only, and never after resolution; the alert's Mark
published button checks the clicker, closes the run without a second post and rewrites
the alert.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from prometheus_client import REGISTRY
from sqlmodel import col, select

from bot.blocks import ACTION_ALERT_PUBLISHED
from core.models import EffectRow
from core.policies import EffectStep, Finding, PublishOutcome
from core.states import DraftState, RunState
from tests.fakes.slack_api import rate_limited
from tests.fakes.webhook import accept, accept_then_hang
from tests.harness.bots import operator
from tests.harness.publishing_bots import BotHarness
from tests.harness.slack_harness import eventually
from tests.harness.worlds import ALERTS, HANG, HOOK_KEY, KEY, MENTIONS, RECIPE, RUN, SLOT, MakeWorld


def test_an_unresolved_alert_is_reminded_once_per_interval(worlds: MakeWorld, db_url: str) -> None:
    w = worlds(db_url, target="webhook-no-status", slack='alert_reminder = "1h"')
    w.go_uncertain()
    assert len(w.alert_messages()) == 1

    assert w.alerts().sweep() == 0
    w.clock.advance(timedelta(minutes=59))
    assert w.alerts().sweep() == 0
    w.service().publish_pending()  # a reconcile pass in between pings nobody either
    assert len(w.alert_messages()) == 1

    w.clock.advance(timedelta(minutes=2))
    assert w.alerts().sweep() == 1
    assert w.alerts("w2").sweep() == 0
    assert w.alerts().sweep() == 0
    messages = w.alert_messages()
    assert len(messages) == 2
    reminder = str(messages[1]["blocks"])
    assert "Reminder" in reminder and RUN in messages[1]["text"]
    for mention in MENTIONS:
        assert mention in reminder

    w.clock.advance(timedelta(hours=1))
    assert w.alerts().sweep() == 1
    assert w.alerts().sweep() == 0
    assert len(w.alert_messages()) == 3
    assert w.posts() == 1

    w.resolver().resolve(RUN, Finding.PUBLISHED, actor="U0ADMIN")
    w.clock.advance(timedelta(hours=2))
    assert w.alerts().sweep() == 0
    assert len(w.alert_messages()) == 3


def test_mark_published_clicked_on_the_alert_closes_the_run_without_a_second_post(
    bot_harness: Callable[..., BotHarness], sqlite_url: str
) -> None:
    h = bot_harness(sqlite_url, status_url=False)
    h.hook.script_post(accept_then_hang(HANG))
    assert operator(h.bot).draft(RECIPE, SLOT).key == KEY
    h.approve()

    assert h.bot.services.publishing.publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    h.bot.reconcile()  # the periodic pass: no second POST, no second alert
    [alert] = h.slack.messages(ALERTS)
    assert RUN in alert["text"]
    for mention in MENTIONS:
        assert mention in str(alert["blocks"])

    h.click_alert(ACTION_ALERT_PUBLISHED, "U0EDITOR")  # an approver, not an admin
    [refusal] = eventually(lambda: h.replies("U0EDITOR"), "the refusal")
    assert "admins" in refusal
    assert h.run_row().state == RunState.UNCERTAIN

    h.click_alert(ACTION_ALERT_PUBLISHED, "U0ADMIN")
    eventually(lambda: h.run_row().state == RunState.SUCCEEDED, "the run to succeed")
    [update] = eventually(lambda: h.slack.calls("chat.update"), "the alert to be updated")
    assert update.params["channel"] == ALERTS
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"]
    assert "U0ADMIN" in str(update.params["blocks"])
    h.bot.host.wait_idle(5)
    h.bot.reconcile()

    assert len(h.hook.posts) == 1
    assert list(h.hook.publications) == [HOOK_KEY]
    assert h.draft_row().state == DraftState.PUBLISHED
    assert len(h.slack.messages(ALERTS)) == 1


def test_an_alert_button_waits_out_a_429_when_it_rewrites_the_alert(
    bot_harness: Callable[..., BotHarness], sqlite_url: str
) -> None:
    """The alert is rewritten through the same paced, classified channel code as every
    other post: a 429 is waited out, not dropped."""
    h = bot_harness(sqlite_url, status_url=False)
    h.hook.script_post(accept_then_hang(HANG))
    assert operator(h.bot).draft(RECIPE, SLOT).key == KEY
    h.approve()
    assert h.bot.services.publishing.publish_run(RUN).outcome == PublishOutcome.UNCERTAIN
    h.slack.script("chat.update", rate_limited(1))

    h.click_alert(ACTION_ALERT_PUBLISHED, "U0ADMIN")

    eventually(lambda: len(h.slack.calls("chat.update")) == 2, "the update sent again", 10)
    [alert] = h.slack.messages(ALERTS)
    assert not [b for b in alert["blocks"] if b["type"] == "actions"]
    assert "U0ADMIN" in str(alert["blocks"])
    assert h.run_row().state == RunState.SUCCEEDED


def test_an_alert_and_its_settle_rewrite_count_as_one_alert(worlds: MakeWorld, db_url: str) -> None:
    """`galley_alerts_total` counts alert posts by the receipt's stored step: the rewrite
    that settles an alert (`alert|…|settled`, step alert-settled) is no second alert."""
    w = worlds(db_url, target="webhook-no-status")
    before = _alerts_counted()
    w.go_uncertain()
    w.resolver().resolve(RUN, Finding.PUBLISHED, actor="U0ADMIN")
    assert w.alerts().settle_resolved() == 1

    with w.store.read() as session:
        steps = session.exec(
            select(EffectRow.step).where(col(EffectRow.key).startswith("alert|"))
        ).all()
    assert sorted(steps) == [EffectStep.ALERT, EffectStep.ALERT_SETTLED]
    assert _alerts_counted() - before == 1


def _alerts_counted() -> float:
    return REGISTRY.get_sample_value("galley_alerts_total", {"outcome": "succeeded"}) or 0.0


def test_a_settled_alert_names_the_person_not_the_worker_that_finished(
    worlds: MakeWorld, db_url: str
) -> None:
    """A person says it was not published; a worker then publishes it: the settled alert
    says who decided, never the worker's token."""
    w = worlds(db_url)
    w.go_uncertain()
    w.alerts().sweep()
    assert len(w.alert_messages()) == 1
    w.hook.script_post(accept())
    w.resolver().resolve(RUN, Finding.ABSENT, actor="U0ADMIN")
    assert w.service().publish_run(RUN).outcome == PublishOutcome.PUBLISHED
    assert w.run_row().state == RunState.SUCCEEDED

    assert w.alerts().settle_resolved() == 1
    [alert] = w.alert_messages()
    assert "Settled by <@U0ADMIN>" in str(alert["blocks"])
    assert "w1" not in str(alert["blocks"])
