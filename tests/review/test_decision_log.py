"""The decision log (docs/design.md §35): every approval, rejection, edit,
redraft, unapprove and resolution, read from the event rows those acts write, with who,
when, the revision and its text hash, the stage and the outcome; pages by (at, id).
On both backends; assertions on what `g.decisions()` and `galley decisions` return."""

from __future__ import annotations

import csv
import io
import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from typer.testing import CliRunner

from bot.cli import app
from core.api.decisions import DecisionView
from core.drafting.service import DraftingService
from core.failpoints import hook
from core.identity import text_hash
from core.policies import Verdict
from core.review.queue import ReviewAnswer, decide, edit
from core.review.redraft_claims import RedraftClaim
from core.review.redrafting import RedraftService
from core.review.unapproval import unapprove
from core.setup.config import parse_config
from core.slots.schedule import slot_at_wall
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text
from tests.harness.worlds import KEY, RUN, SLOT, MakeWorld, World

ANA, BEN, ADMIN = "U0ANA", "U0BEN", "U0ADMIN"
TWO = 'approvals_required = 2\ndraft_ahead = "2d"'
REDRAFTED = "The redrafted post."
NOTE = "Shorter, please."


def ahead(worlds: MakeWorld, db_url: str, defaults: str = TWO) -> World:
    world = worlds(db_url, defaults=defaults)
    world.clock.set(datetime.fromisoformat(SLOT).replace(tzinfo=UTC) - timedelta(days=1))
    return world


class Editors:
    """Ana and Ben are approvers through the S0EDITORS group `[slack] approvers` names."""

    def group_members(self, group_id: str) -> frozenset[str]:
        return frozenset({ANA, BEN}) if group_id == "S0EDITORS" else frozenset()


def judge(
    world: World, user: str, revision: int, verdict: Verdict = Verdict.APPROVED
) -> ReviewAnswer:
    return decide(
        world.store,
        world.config,
        world.clock,
        draft_key=KEY,
        revision=revision,
        verdict=verdict,
        user=user,
        permitted=True,
        reason="off-brand" if verdict == Verdict.REJECTED else None,
        directory=Editors(),
    )


def edited(world: World, user: str, revision: int, text: str) -> None:
    answer = edit(
        world.store,
        world.config,
        world.clock,
        draft_key=KEY,
        revision=revision,
        text=text,
        user=user,
        permitted=True,
    )
    assert answer.accepted, answer


def redrafted(world: World, user: str, revision: int) -> None:
    service = RedraftService(
        world.store, world.config, world.clock, InstantDrafter(REDRAFTED), worker="w2"
    )
    claim = service.ask(draft_key=KEY, revision=revision, note=NOTE, user=user, permitted=True)
    assert isinstance(claim, RedraftClaim), claim
    assert service.run(claim).accepted


def tick(world: World) -> None:
    world.clock.advance(timedelta(minutes=1))


def oldest_first(world: World) -> list[DecisionView]:
    return list(reversed(world.galley.decisions()))


def test_every_kind_of_decision_is_logged_with_who_revision_hash_and_outcome(
    worlds: MakeWorld, db_url: str
) -> None:
    world = ahead(worlds, db_url)
    world.draft()
    for act in (
        lambda: edited(world, ANA, 1, "Edited by Ana."),
        lambda: redrafted(world, BEN, 2),
        lambda: judge(world, ANA, 3),
        lambda: judge(world, BEN, 3),
        lambda: unapprove(
            world.store,
            world.config,
            world.clock,
            draft_key=KEY,
            revision=3,
            user=ANA,
            permitted=True,
        ),
        lambda: world.resolver().cancel(RUN, actor=ADMIN),
    ):
        tick(world)
        act()

    logged = oldest_first(world)
    assert [(d.decision, d.who, d.revision, d.stage, d.outcome) for d in logged] == [
        ("edit", ANA, 2, None, "edited"),  # a recipe without approval_stages: no stage
        ("redraft", BEN, 2, None, "requested"),
        ("approval", ANA, 3, None, "counted"),
        ("approval", BEN, 3, None, "approved"),
        ("unapprove", ANA, 3, None, "ready"),
        ("resolution", ADMIN, 4, None, "cancelled"),
    ]
    assert [d.text_hash for d in logged] == [
        text_hash("Edited by Ana."),
        text_hash("Edited by Ana."),
        *[text_hash(REDRAFTED)] * 4,
    ]
    assert logged[1].reason == NOTE
    assert {(d.recipe, d.run_id, d.draft_key) for d in logged} == {("weekly-update", RUN, KEY)}
    assert all(d.local_at == d.at for d in logged)
    assert {d.local_at.tzinfo for d in logged} == {ZoneInfo("Europe/London")}
    assert [d.at for d in logged] == sorted(d.at for d in logged)


def test_a_rejection_is_logged_with_its_reason_and_a_refused_click_is_not(
    worlds: MakeWorld, db_url: str
) -> None:
    world = ahead(worlds, db_url, defaults='draft_ahead = "2d"')
    world.draft()
    assert judge(world, ANA, 1, Verdict.REJECTED).accepted
    assert not judge(world, BEN, 1).accepted  # decided already: nothing to log

    [rejection] = world.galley.decisions()
    assert (rejection.decision, rejection.who, rejection.outcome, rejection.reason) == (
        "rejection",
        ANA,
        "rejected",
        "off-brand",
    )
    assert rejection.revision == 1 and rejection.text_hash is not None


def test_two_approvers_at_once_log_one_counted_and_one_deciding_approval(
    worlds: MakeWorld, db_url: str
) -> None:
    world = ahead(worlds, db_url)
    world.draft()
    first_inside, second_counted = threading.Event(), threading.Event()

    def meet_the_other() -> None:
        """The first approver waits inside its transaction for the second: the draft's
        lock keeps the second out until the first commits, so the wait times out."""
        if first_inside.is_set():
            second_counted.set()
            return
        first_inside.set()
        second_counted.wait(timeout=2.0)

    def click(user: str, after: threading.Event | None) -> None:
        if after is not None:
            assert after.wait(timeout=30)
        assert judge(world, user, 1).accepted

    with hook("after_approval_counted", meet_the_other):
        threads = [
            threading.Thread(target=click, args=(ANA, None)),
            threading.Thread(target=click, args=(BEN, first_inside)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)

    logged = oldest_first(world)
    assert [(d.who, d.outcome) for d in logged] == [(ANA, "counted"), (BEN, "approved")]


def test_pages_follow_one_another_and_since_and_recipe_narrow_the_log(
    worlds: MakeWorld, db_url: str
) -> None:
    world = ahead(worlds, db_url)
    world.draft()
    for revision in range(1, 6):
        tick(world)
        edited(world, ANA, revision, f"Edit {revision}.")
    every = world.galley.decisions()
    assert [d.revision for d in every] == [6, 5, 4, 3, 2]

    first = world.galley.decisions(limit=2)
    second = world.galley.decisions(limit=2, before=first[-1].id)
    third = world.galley.decisions(limit=2, before=second[-1].id)
    assert [d.id for d in [*first, *second, *third]] == [d.id for d in every]

    since = every[1].at
    assert [d.revision for d in world.galley.decisions(since.isoformat())] == [6, 5]
    assert world.galley.decisions(recipe="another-recipe") == []
    assert len(world.galley.decisions(recipe="weekly-update")) == 5


def test_galley_decisions_prints_json_and_csv(store: Store, db_url: str, tmp_path: Path) -> None:
    text = config_text(pending_limit=10)
    cfg, clock = parse_config(text), FrozenClock(datetime(2026, 11, 2, 9, 5, tzinfo=UTC))
    recipe = cfg.recipes["weekly-update"]
    slot = slot_at_wall(recipe, datetime.fromisoformat("2026-11-02T09:00"))
    drafted = DraftingService(store, InstantDrafter(), clock=clock, worker="w1").draft_slot(
        recipe, slot
    )
    assert drafted.key is not None
    rejected = decide(
        store,
        cfg,
        clock,
        draft_key=drafted.key,
        revision=1,
        verdict=Verdict.REJECTED,
        user=ANA,
        permitted=True,
        reason="off-brand",
    )
    assert rejected.accepted
    config = tmp_path / "galley.toml"
    config.write_text(text)
    env = {"GALLEY_CONFIG": str(config), "GALLEY_DATABASE_URL": db_url}

    listed = CliRunner().invoke(app, ["decisions", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.stdout)["decisions"]
    assert (row["decision"], row["who"], row["revision"]) == ("rejection", ANA, 1)

    table = CliRunner().invoke(app, ["decisions", "--csv", "--since", "2026-11-01"], env=env)
    assert table.exit_code == 0, table.output
    [header, *rows] = list(csv.reader(io.StringIO(table.stdout)))
    assert header[:3] == ["id", "at", "local_at"] and len(rows) == 1
    assert rows[0][header.index("reason")] == "off-brand"
    assert rows[0][header.index("stage")] == ""  # no approval_stages: no stage named

    refused = CliRunner().invoke(app, ["decisions", "--since", "last tuesday"], env=env)
    assert refused.exit_code == 2
