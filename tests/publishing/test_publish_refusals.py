"""A refused publication is classified, not guessed at (docs/design.md §8): 429 and 503
are tried again (not before Retry-After) and published once; 422 fails the run with no
retry; 403 fails it and alerts people.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.policies import PublishOutcome
from core.states import EffectState, RunState
from tests.fakes.webhook import status
from tests.harness.worlds import HOOK_KEY, RUN, MakeWorld

# --- refusals: retry the right failures (docs/design.md §8) -------------------------------


@pytest.mark.parametrize("code", [429, 503])
def test_a_publish_refused_for_now_is_tried_again_and_published_once(
    worlds: MakeWorld, db_url: str, code: int
) -> None:
    w = worlds(db_url)
    w.approved()
    w.hook.script_post(status(code, {"Retry-After": "0"}))

    first = w.service().publish_run(RUN)
    assert first.outcome == PublishOutcome.WAITING
    assert w.hook.publications == {}
    assert w.run_row().state == RunState.PUBLISHING
    results = w.service("w2").publish_pending()

    assert [r.outcome for r in results] == [PublishOutcome.PUBLISHED]
    assert w.posts() == 2  # the refused POST, then the one that landed
    assert list(w.hook.publications) == [HOOK_KEY]
    [effect] = w.publish_effects()
    assert (effect.state, effect.tries) == (EffectState.SUCCEEDED, 2)
    assert w.run_row().state == RunState.SUCCEEDED
    assert w.alert_messages() == []


def test_a_publish_refused_as_invalid_fails_the_run_and_is_not_retried(
    worlds: MakeWorld, db_url: str
) -> None:
    w = worlds(db_url)
    w.approved()
    w.hook.script_post(status(422))

    result = w.service().publish_run(RUN)

    assert result.outcome == PublishOutcome.FAILED
    assert result.detail and "422" in result.detail
    run = w.run_row()
    assert (run.state, run.reason) == (RunState.FAILED, "publish_rejected")
    assert w.service().publish_pending() == []
    w.clock.advance(timedelta(hours=1))
    assert w.service().publish_pending() == []
    assert w.posts() == 1
    assert w.hook.publications == {}
    effect = w.effect()
    assert effect is not None and effect.state == EffectState.FAILED


def test_a_publish_refused_with_retry_after_is_not_sent_again_before_it(
    worlds: MakeWorld, sqlite_url: str
) -> None:
    w = worlds(sqlite_url)
    w.approved()
    w.hook.script_post(status(429, {"Retry-After": "60"}))
    assert w.service().publish_run(RUN).outcome == PublishOutcome.WAITING

    w.clock.advance(timedelta(seconds=2))  # the bot's next reconcile pass
    w.service().publish_pending()
    assert w.posts() == 1

    w.clock.advance(timedelta(seconds=60))
    assert [r.outcome for r in w.service().publish_pending()] == [PublishOutcome.PUBLISHED]
    assert w.posts() == 2


def test_a_publish_refused_for_auth_fails_the_run_and_alerts_people(
    worlds: MakeWorld, sqlite_url: str
) -> None:
    w = worlds(sqlite_url)
    w.approved()
    w.hook.script_post(status(403))

    assert w.service().publish_run(RUN).outcome == PublishOutcome.FAILED
    w.alerts().sweep()

    assert w.posts() == 1
    assert w.run_row().state == RunState.FAILED
    [alert] = w.alert_messages()
    assert RUN in alert["text"]
