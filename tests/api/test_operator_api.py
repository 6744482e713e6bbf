"""The operator API a notebook uses (`import galley`): reading drafts and ledgers,
deciding as a person with Slack's permission rules, rendering safely, `galley show`.

Runs on SQLite and PostgreSQL against the fake Anthropic API over real HTTP, with an
injected clock. Assertions are on rows and return values, never on logs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from IPython.lib.pretty import pretty
from sqlmodel import col, select
from typer.testing import CliRunner

import galley
from bot.cli import app
from core.drafting.attempts import Backoff
from core.models import DraftRow, EventRow, RecipeRow, RunRow
from core.setup.settings import Settings
from core.states import DraftState, RunState
from core.store.effects import EffectLedger
from core.store.engine import Store
from core.store.receipts import EffectSpec, Proof
from core.testing import FrozenClock
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic, ok, status

RECIPE = "weekly-update"
SLOT = "2026-11-23T09:00"
RUN = f"{RECIPE}@{SLOT}"
KEY = f"linkedin|{RUN}|v1"
PEOPLE = 'approvers = ["U0EDITOR"]\nadmins = ["U0ADMIN"]'
Connect = Callable[[str | None], galley.Galley]
HOSTILE = "<script>alert('x')</script> & <b>bold</b>"


class NoWait(Backoff):
    def delay(self, attempt: int, retry_after: float | None) -> float:
        return 0.0


@pytest.fixture
def settings(tmp_path: Path, db_url: str, fake_anthropic: FakeAnthropic) -> Settings:
    config = tmp_path / "galley.toml"
    text = config_text(max_attempts=2)
    config.write_text(
        text.replace('review_channel = "C0REVIEW"', f'review_channel = "C0REVIEW"\n{PEOPLE}')
    )
    return Settings(
        galley_config=config,
        galley_database_url=db_url,
        anthropic_api_key="test-key",
        anthropic_base_url=fake_anthropic.url,
    )


@pytest.fixture
def db(settings: Settings) -> Iterator[Store]:
    """The test's own connection to the database the notebook opens, to read rows."""
    store = Store(settings.galley_database_url)
    yield store
    store.dispose()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def opened() -> Iterator[list[galley.Galley]]:
    handles: list[galley.Galley] = []
    yield handles
    for handle in handles:
        handle._services.store.dispose()  # each notebook's own engine


@pytest.fixture
def connect(settings: Settings, clock: FrozenClock, opened: list[galley.Galley]) -> Connect:
    def open_as(user: str | None) -> galley.Galley:
        handle = galley.connect(user, settings=settings, clock=clock)
        handle._services._backoff = NoWait()  # retried model calls need not wait
        opened.append(handle)
        return handle

    return open_as


def rows(store: Store, model: type[Any], *where: Any) -> list[Any]:
    with store.transaction() as session:
        return list(session.exec(select(model).where(*where)).all())


def test_a_person_reads_a_draft_and_approves_exactly_that_revision(
    connect: Connect, db: Store
) -> None:
    admin, editor = connect("U0ADMIN"), connect("U0EDITOR")
    assert admin.draft(RECIPE, SLOT).key == KEY

    [waiting] = editor.drafts()
    assert (waiting.key, waiting.state, waiting.revision) == (KEY, "ready", 1)
    by_run, by_key = editor.show(RUN), editor.show(KEY)
    assert by_run.to_json() == by_key.to_json()
    assert by_key.text == "Draft for: Write the weekly update for 23 November 2026."

    answer = editor.approve(by_key)

    assert (answer.accepted, answer.state) == (True, "approved")
    [decision] = rows(
        db,
        EventRow,
        col(EventRow.subject_id) == KEY,
        col(EventRow.to_state) == "approved",
    )
    assert decision.actor == "U0EDITOR"
    [run] = rows(db, RunRow, col(RunRow.id) == RUN)
    assert run.state == RunState.SUCCEEDED  # no publish target: approval ends the run
    assert editor.drafts() == []
    assert [d.actor for d in editor.show(KEY).decisions] == ["U0EDITOR"]


def test_a_stranger_cannot_decide_and_an_approver_cannot_administer(
    connect: Connect, db: Store
) -> None:
    admin, editor, stranger = connect("U0ADMIN"), connect("U0EDITOR"), connect("U0STRANGER")
    admin.draft(RECIPE, SLOT)
    shown = stranger.show(KEY)  # reading needs no permission

    refused = stranger.approve(shown)
    assert (refused.accepted, refused.message) == (
        False,
        "You are not one of this Galley's approvers.",
    )
    assert stranger.edit(shown, "mine now").accepted is False
    with pytest.raises(galley.NotPermitted):
        editor.bump(RECIPE)
    with pytest.raises(galley.NotPermitted):
        editor.pause("all")
    with pytest.raises(galley.NotPermitted):
        stranger.run_now(RECIPE)
    with pytest.raises(galley.NotPermitted):
        editor.approve(shown, user="U0ADMIN")  # opened as one person, cannot act as another

    [draft] = rows(db, DraftRow)
    assert (draft.state, draft.revision, draft.decided_by) == (DraftState.READY, 1, None)
    [recipe] = rows(db, RecipeRow)
    assert (recipe.version, recipe.paused) == (1, False)
    assert admin.bump(RECIPE) == 2  # an admin may
    assert [e.actor for e in admin.events() if e.to_state == "v2"] == ["U0ADMIN"]


def test_a_notebook_that_does_not_say_who_it_is_only_reads(
    connect: Connect, monkeypatch: pytest.MonkeyPatch, db: Store
) -> None:
    monkeypatch.delenv(galley.USER_VARIABLE, raising=False)
    admin, nobody = connect("U0ADMIN"), connect(None)
    admin.draft(RECIPE, SLOT)

    shown = nobody.show(KEY)
    for write in (
        lambda: nobody.approve(shown),
        lambda: nobody.approve(shown, user="U0EDITOR"),
        lambda: nobody.bump(RECIPE, actor="U0ADMIN"),
        lambda: nobody.draft(RECIPE, SLOT),
    ):
        with pytest.raises(galley.NotPermitted, match="reading only"):
            write()
    [draft] = rows(db, DraftRow)
    assert (draft.state, draft.decided_by) == (DraftState.READY, None)


def test_a_decision_must_say_which_revision_it_read(connect: Connect) -> None:
    admin, editor = connect("U0ADMIN"), connect("U0EDITOR")
    admin.draft(RECIPE, SLOT)

    with pytest.raises(galley.RevisionRequired):
        editor.approve(KEY)
    assert editor.approve(KEY, revision=1).accepted


def test_show_has_revisions_decisions_attempts_with_causes_and_effects(
    connect: Connect, fake_anthropic: FakeAnthropic, db: Store, clock: FrozenClock
) -> None:
    admin, editor = connect("U0ADMIN"), connect("U0EDITOR")
    fake_anthropic.script(status(529), ok(text="The model's words."))
    admin.draft(RECIPE, SLOT)
    first = editor.show(KEY)
    assert editor.edit(first, "An editor's words.").accepted
    ledger = EffectLedger(db, clock, "test-worker")
    start = ledger.begin(
        EffectSpec(
            f"{KEY}|review", draft_key=KEY, step="review", payload={"c": 1}, lease=timedelta(1)
        )
    )
    ledger.succeed(
        start, Proof("1700000000.000100", {"channel": "C0REVIEW", "ts": "1700000000.000100"})
    )
    assert editor.reject(editor.show(KEY), reason="off-brand").accepted

    shown = json.loads(json.dumps(editor.show(RUN).to_json()))

    assert shown["draft"]["text"] == "An editor's words."
    assert [(r["revision"], r["written_by"], r["text"]) for r in shown["revisions"]] == [
        (1, "model:claude-test", "The model's words."),
        (2, "U0EDITOR", "An editor's words."),
    ]
    assert [(d["to_state"], d["actor"], d["reason"]) for d in shown["decisions"]] == [
        ("rejected", "U0EDITOR", "off-brand")
    ]
    assert [(a["number"], a["outcome"], a["http_status"]) for a in shown["attempts"]] == [
        (1, "rejected_retryable", 529),
        (2, "ok", None),
    ]
    assert shown["attempts"][0]["cause"]  # the error the API gave, for people
    assert [(e["step"], e["state"], e["external_id"]) for e in shown["effects"]] == [
        ("review", "succeeded", "1700000000.000100")
    ]
    assert shown["draft"]["est_cost_usd"] > 0


def test_html_escapes_draft_text_everywhere_it_shows(
    connect: Connect, fake_anthropic: FakeAnthropic
) -> None:
    admin = connect("U0ADMIN")
    fake_anthropic.script(ok(text=HOSTILE))
    admin.draft(RECIPE, SLOT)
    admin.bump(RECIPE, reason="<img src=x onerror=alert(1)>")

    for shown in (admin.show(KEY), admin.drafts(state=None), admin.events(), admin.show(RUN)):
        page = shown._repr_html_()
        assert "<script>" not in page and "<b>" not in page and "<img" not in page
    page = admin.show(KEY)._repr_html_()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page
    assert HOSTILE in str(admin.show(KEY))  # the terminal shows it as written


def test_collections_convert_to_data_frames(connect: Connect) -> None:
    admin = connect("U0ADMIN")
    admin.draft(RECIPE, SLOT)
    admin.draft(RECIPE, "2026-11-30T09:00")

    runs = admin.runs().to_frame()
    assert list(runs.columns) == [
        "id",
        "recipe",
        "slot",
        "state",
        "reason",
        "draft_key",
        "attempts",
        "item_title",  # an items recipe's run names its item (docs/design.md §29)
        "item_link",
    ]
    assert sorted(runs["id"]) == [RUN, f"{RECIPE}@2026-11-30T09:00"]
    assert list(runs["attempts"]) == [1, 1]
    assert admin.runs(limit=None) == admin.runs()  # the whole-history query agrees
    assert admin.runs(state="awaiting_review", limit=None) == admin.runs("awaiting_review")
    assert len(admin.drafts().to_frame()) == 2
    assert len(admin.attempts().to_frame()) == 2
    assert admin.effects().to_frame().empty
    assert {"run_id", "actor", "to_state"} <= set(admin.events().to_frame().columns)
    # and in a terminal (IPython) each reads as a text table, not a list of dataclasses
    assert pretty(admin.runs()).splitlines()[:2] == [
        "runs (2 rows)",
        "id                              recipe         slot              state            "
        "reason  draft_key                                   attempts",
    ]
    assert pretty(admin.status()).splitlines()[0] == "status"


def test_a_failed_draft_is_drafted_again_by_retry_without_a_bump(
    connect: Connect, fake_anthropic: FakeAnthropic, db: Store
) -> None:
    admin = connect("U0ADMIN")
    fake_anthropic.script(status(400))
    assert admin.draft(RECIPE, SLOT).outcome == "failed"
    assert admin.show(RUN).attention() is not None  # an alert-worthy run says what to do
    assert "galley-alert" in admin.show(RUN)._repr_html_()

    said = admin.retry(RUN)

    assert "drafted" in said
    [run] = rows(db, RunRow, col(RunRow.id) == RUN)
    assert run.state == RunState.AWAITING_REVIEW
    [recipe] = rows(db, RecipeRow)
    assert recipe.version == 1
    assert len(fake_anthropic.requests) == 2


def test_galley_show_prints_the_same_structure_as_the_api(
    settings: Settings, connect: Connect
) -> None:
    admin = connect("U0ADMIN")
    admin.draft(RECIPE, SLOT)
    env = {
        "GALLEY_CONFIG": str(settings.galley_config),
        "GALLEY_DATABASE_URL": settings.galley_database_url,
    }
    runner = CliRunner()

    as_json = runner.invoke(app, ["show", RUN, "--json"], env=env)
    as_text = runner.invoke(app, ["show", KEY], env=env)
    missing = runner.invoke(app, ["show", "nothing@2026-01-01T00:00"], env=env)

    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == json.loads(json.dumps(admin.show(RUN).to_json()))
    assert (
        as_text.exit_code == 0 and "Write the weekly update for 23 November 2026." in as_text.stdout
    )
    assert missing.exit_code == 2 and "no run or draft" in missing.stderr


def test_galley_show_fits_an_80_column_terminal_and_cuts_nothing(
    settings: Settings, connect: Connect, fake_anthropic: FakeAnthropic
) -> None:
    admin, editor = connect("U0ADMIN"), connect("U0EDITOR")
    fake_anthropic.script(status(529), ok(text="The model's words."))
    admin.draft(RECIPE, SLOT)
    reason = "off-brand: " + " ".join(f"word{i}" for i in range(40))  # longer than a cell
    assert editor.reject(editor.show(KEY), reason=reason).accepted
    env = {
        "GALLEY_CONFIG": str(settings.galley_config),
        "GALLEY_DATABASE_URL": settings.galley_database_url,
        "COLUMNS": "80",
    }

    shown = CliRunner().invoke(app, ["show", KEY], env=env)

    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    words = " ".join(shown.stdout.split())
    assert reason in words  # wrapped, not clipped
    cause = admin.show(KEY).attempts[0].cause
    assert cause and " ".join(cause.split()) in words
