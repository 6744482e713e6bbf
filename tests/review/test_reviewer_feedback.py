"""Reviewers' words kept per recipe (docs/design.md §22): rejection reasons and
redraft notes, shown by `galley show`, the daily digest and `g.feedback(recipe)`; and
`galley redraft` itself. The real CLI against the fake Anthropic API, on both backends."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlmodel import col, select
from typer.testing import CliRunner

from bot.cli import app
from bot.digest_text import digest_text
from core.api.galley import Galley
from core.drafting_policies import AttemptCause
from core.models import AttemptRow
from core.operations.digest import build_digest
from core.review.feedback import most_asked
from core.setup.config import load_config
from core.setup.settings import Settings
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic, ok

RECIPE = "weekly-update"
FIRST, SECOND = "2026-11-23T09:00", "2026-11-30T09:00"
KEY = f"linkedin|{RECIPE}@{FIRST}|v1"


@pytest.fixture
def env(tmp_path: Path, db_url: str, fake_anthropic: FakeAnthropic) -> dict[str, str]:
    config = tmp_path / "galley.toml"
    text = config_text(pending_limit=5).replace(
        "[defaults]\n", "[defaults]\napprovals_required = 2\neditor_may_approve = false\n"
    )
    config.write_text(text)
    return {
        "GALLEY_CONFIG": str(config),
        "GALLEY_DATABASE_URL": db_url,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
    }


def galley(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout


def operator(env: dict[str, str]) -> Galley:
    settings = Settings(
        galley_config=Path(env["GALLEY_CONFIG"]), galley_database_url=env["GALLEY_DATABASE_URL"]
    )
    return Galley.from_settings(settings)


def test_galley_redraft_makes_the_next_revision_and_refuses_a_stale_one(
    env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    assert galley(env, "draft", RECIPE, "--slot", FIRST)[0] == 0
    fake_anthropic.script(ok(text="A shorter update."))

    code, out = galley(env, "redraft", KEY, "--note", "shorter", "--as", "U0EDITOR")
    stale, said = galley(env, "redraft", KEY, "--note", "shorter", "--revision", "1")

    assert (code, out.strip()) == (0, "Redrafted as revision 2.")
    assert stale == 1 and "edited since" in said
    assert len(fake_anthropic.requests) == 2  # the draft and one redraft
    detail = operator(env).show(KEY)
    assert (detail.revision, detail.text) == (2, "A shorter update.")
    with Store(env["GALLEY_DATABASE_URL"]).read() as session:
        causes = session.exec(select(AttemptRow.cause).order_by(col(AttemptRow.number))).all()
    assert list(causes) == [AttemptCause.DRAFT, AttemptCause.REDRAFT]
    assert [a.made_for for a in operator(env).show(KEY).attempts] == ["draft", "redraft"]


def test_notes_and_reasons_are_kept_per_recipe_and_shown_everywhere(
    env: dict[str, str], db_url: str
) -> None:
    assert galley(env, "draft", RECIPE, "--slot", FIRST)[0] == 0
    assert galley(env, "draft", RECIPE, "--slot", SECOND)[0] == 0
    for note in ("shorter, mention the launch date", "Shorter and warmer"):
        assert galley(env, "redraft", KEY, "--note", note, "--as", "U0EDITOR")[0] == 0
    g = operator(env)
    second = g.show(f"linkedin|{RECIPE}@{SECOND}|v1")
    assert g.reject(second, reason="Off-brand tone", user="U0EDITOR2").accepted

    table = g.feedback(RECIPE)
    code, out = galley(env, "show", KEY, "--json")
    digest = digest_text(
        build_digest(Store(db_url), load_config(Path(env["GALLEY_CONFIG"])), datetime.now(UTC))
    )

    assert [(e.kind, e.text) for e in table] == [
        ("rejection", "Off-brand tone"),
        ("redraft", "Shorter and warmer"),
        ("redraft", "shorter, mention the launch date"),
    ]
    assert "Off-brand tone" in table._repr_html_() and len(table.to_json()) == 3
    assert code == 0
    shown = json.loads(out)["feedback"]
    assert "2 redrafts, 1 rejection" in shown and "most asked: 'shorter'" in shown
    assert "*weekly-update*: 2 redrafts this month, 1 rejected, most asked: 'shorter'" in digest


def test_the_cli_decides_by_the_same_approval_rule(env: dict[str, str]) -> None:
    assert galley(env, "draft", RECIPE, "--slot", FIRST)[0] == 0

    first = galley(env, "approve", KEY, "--as", "U0ANA")
    twice = galley(env, "approve", KEY, "--as", "U0ANA")
    assert first[0] == 0 and "1 of 2" in first[1]
    assert twice[0] == 1 and "counted already" in twice[1]
    assert galley(env, "redraft", KEY, "--note", "shorter", "--as", "U0ANA")[0] == 0
    reset = galley(env, "approve", KEY, "--as", "U0ANA")  # revision 2: the count starts again
    done = galley(env, "approve", KEY, "--as", "U0BEN")

    assert reset[0] == 0 and "1 of 2" in reset[1]
    assert done[0] == 0 and done[1].strip() == "Approved."
    assert operator(env).show(KEY).draft.state == "approved"  # type: ignore[union-attr]


def test_most_asked_counts_phrases_not_whole_notes() -> None:
    notes = ["shorter, mention the launch date", "Shorter", "warmer and shorter"]
    assert most_asked(notes) == "shorter"
    assert most_asked([]) is None


def test_feedback_for_every_recipe_at_once_counts_the_window_and_keeps_each_newest_reason(
    store: Store,
) -> None:
    """The digest's read: per recipe, the rejections and redrafts since `since`, the
    newest rejection that gave a reason, and the phrase asked most (newest wins a tie);
    older entries, failed redrafts and recipes not asked for do not count."""
    from datetime import timedelta

    from core.drafting_policies import RedraftState
    from core.models import DraftRow, RecipeRow, RedraftRow, RunRow
    from core.review.feedback import feedback_by_recipe, recipe_feedback
    from core.states import DraftState, RunState

    since = datetime(2026, 11, 1, tzinfo=UTC)
    day = timedelta(days=1)
    rejections = {  # recipe: (days after `since`, reason), oldest first
        "alpha": [(-3, "before the window"), (2, "too long"), (5, "off-brand"), (6, None)],
        "beta": [(4, "wrong date")],
        "gamma": [(1, "not asked for")],
    }
    notes = [  # (recipe, days after `since`, note, state)
        ("alpha", 1, "shorter", RedraftState.DONE),
        ("alpha", 3, "warmer", RedraftState.DONE),
        ("alpha", 4, "warmer", RedraftState.FAILED),  # a failed redraft is not feedback
        ("alpha", 7, "shorter", RedraftState.DONE),
    ]
    recipes, runs, drafts = [], [], []
    for recipe, entries in rejections.items():
        recipes.append(RecipeRow(name=recipe, version=1, paused=False, updated_at=since))
        for n, (days, reason) in enumerate(entries):
            at = since + days * day
            run = f"{recipe}@2026-10-{n + 10}T09:00"
            runs.append(
                RunRow(
                    id=run,
                    recipe=recipe,
                    slot_wall=run.split("@")[1],
                    slot_at=at,
                    state=RunState.REJECTED,
                    created_at=at,
                    updated_at=at,
                )
            )
            drafts.append(
                DraftRow(
                    key=f"linkedin|{run}|v1",
                    run_id=run,
                    recipe=recipe,
                    platform="linkedin",
                    version=1,
                    state=DraftState.REJECTED,
                    decision_reason=reason,
                    created_at=at,
                    updated_at=at,
                )
            )
    with store.transaction() as session:
        for rows in (recipes, runs, drafts):  # parents first: no ORM relationships here
            session.add_all(rows)
            session.flush()
        for n, (recipe, days, note, state) in enumerate(notes):
            session.add(
                RedraftRow(
                    key=f"redraft-{n}",
                    draft_key="linkedin|alpha@2026-10-11T09:00|v1",
                    run_id="alpha@2026-10-11T09:00",
                    recipe=recipe,
                    from_revision=n + 1,
                    note=note,
                    requested_by="U0EDITOR",
                    state=state,
                    created_at=since + days * day,
                )
            )

    with store.read() as session:
        found = feedback_by_recipe(session, ["alpha", "beta", "delta"], since, "this month")
        alone = recipe_feedback(session, "beta", since, "this month")

    assert sorted(found) == ["alpha", "beta", "delta"]
    alpha, beta, delta = found["alpha"], found["beta"], found["delta"]
    assert (alpha.rejections, alpha.last_reason) == (3, "off-brand")  # newest with a reason
    assert (alpha.redrafts, alpha.most_asked) == (3, "shorter")  # 2 shorter, 1 warmer
    assert (beta.rejections, beta.redrafts, beta.last_reason) == (1, 0, "wrong date")
    assert (delta.rejections, delta.redrafts, delta.last_reason) == (0, 0, None)
    assert alone == beta


def test_a_refused_stranger_on_the_command_line_is_told_how_to_say_who_they_are(
    env: dict[str, str],
) -> None:
    config = Path(env["GALLEY_CONFIG"])
    config.write_text(
        config.read_text().replace(
            'review_channel = "C0REVIEW"',
            'review_channel = "C0REVIEW"\napprovers = ["U0ANA", "U0BEN"]',
        )
    )
    assert galley(env, "draft", RECIPE, "--slot", FIRST)[0] == 0

    code, said = galley(env, "approve", KEY)  # neither --as nor GALLEY_USER: `cli`

    assert code == 1
    assert said.splitlines() == [
        "You are not one of this Galley's approvers.",
        "(deciding as cli: name an approver with --as U… or GALLEY_USER)",
    ]
    assert galley(env, "approve", KEY, "--as", "U0ANA")[0] == 0
