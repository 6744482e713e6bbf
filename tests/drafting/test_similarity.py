"""Near-duplicates: the method on labelled pairs, what a draft is compared with (on
SQLite and PostgreSQL), and drafting over real HTTP that stores the check with the
draft and re-drafts at most once a slot. Checks rows and requests, never log lines.
"""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rapidfuzz import fuzz, utils
from sqlmodel import col, select

from core.api.galley import Galley
from core.api.services import Services
from core.drafting.anthropic_drafter import AnthropicDrafter
from core.drafting.attempts import Backoff
from core.drafting.similarity import (
    Candidate,
    Match,
    closest,
    comparison_set,
    record_similarity,
    similarity,
)
from core.drafting_policies import DraftOutcome, OnSimilar, SimilarityMethod
from core.errors import ConfigError
from core.models import AttemptRow, DraftRow, RecipeRow, RunRow
from core.review.facts import annotate, recipe_record
from core.review.queue import load_item
from core.setup.config import SIMILAR_WARN_DEFAULT, parse_config
from core.states import DraftState, RunState
from core.store.engine import Store
from core.testing import FrozenClock
from tests.conftest import config_text
from tests.fakes.anthropic_api import FakeAnthropic, ok
from tests.harness.approvals import approve
from tests.harness.posts import FRESH, REWORDED, SEEN

PAIRS = Path(__file__).parents[1] / "data" / "similar_pairs.jsonl"
RECIPE = "weekly-update"
EARLIER, LATER = "2026-11-16T09:00", "2026-11-23T09:00"
EARLIER_KEY = f"linkedin|{RECIPE}@{EARLIER}|v1"
LATER_RUN = f"{RECIPE}@{LATER}"
LATER_KEY = f"linkedin|{LATER_RUN}|v1"
FAST = Backoff(base_seconds=0.01, cap_seconds=0.05)


def labelled_pairs() -> list[dict[str, Any]]:
    return [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line]


# --- the method ----------------------------------------------------------------------------


def test_the_labelled_set_holds_sixty_pairs_of_every_kind_written_for_it() -> None:
    pairs = labelled_pairs()
    kinds = {p["kind"] for p in pairs}
    assert len(pairs) >= 60
    assert {"reworded", "same_topic", "unrelated"} <= kinds
    assert len({p["id"] for p in pairs}) == len(pairs)
    assert all(p["a"] != p["b"] and isinstance(p["duplicate"], bool) for p in pairs)


def test_the_default_threshold_reaches_the_promised_precision_and_recall() -> None:
    pairs = labelled_pairs()
    flagged = [p["duplicate"] for p in pairs if similarity(p["a"], p["b"]) >= SIMILAR_WARN_DEFAULT]
    duplicates = sum(p["duplicate"] for p in pairs)

    precision = sum(flagged) / len(flagged)
    recall = sum(flagged) / duplicates

    assert precision >= 0.9, precision
    assert recall >= 0.8, recall


def test_case_punctuation_and_word_order_do_not_count() -> None:
    assert similarity("Shipped: dark mode, 14 fixes!", "14 FIXES shipped dark mode") == 100
    assert similarity("", "anything") == 0


# --- the comparison set --------------------------------------------------------------------


def add_draft(
    store: Store,
    key: str,
    *,
    state: DraftState,
    text: str,
    days_ago: float,
    clock: FrozenClock,
    recipe: str = RECIPE,
    platform: str = "linkedin",
) -> None:
    at = clock.now() - timedelta(days=days_ago)
    with store.transaction() as session:
        if session.get(RecipeRow, recipe) is None:
            session.add(RecipeRow(name=recipe, updated_at=at))
        session.add(
            RunRow(
                id=key,
                recipe=recipe,
                slot_wall=key,
                slot_at=at,
                state=RunState.SUCCEEDED,
                created_at=at,
                updated_at=at,
            )
        )
        session.flush()
        session.add(
            DraftRow(
                key=key,
                run_id=key,
                recipe=recipe,
                platform=platform,
                version=1,
                state=state,
                text=text,
                revision=1,
                ready_at=at,
                created_at=at,
                updated_at=at,
            )
        )


def test_a_draft_is_compared_with_waiting_drafts_and_recent_approvals_and_publications(
    store: Store,
) -> None:
    clock = FrozenClock()
    included = {
        "waiting": (DraftState.READY, 200),  # waiting for review: however old
        "approved": (DraftState.APPROVED, 10),
        "published": (DraftState.PUBLISHED, 89),
    }
    excluded = {
        "published-long-ago": (DraftState.PUBLISHED, 91),
        "rejected": (DraftState.REJECTED, 1),
        "expired": (DraftState.EXPIRED, 1),
        "superseded": (DraftState.SUPERSEDED, 1),
    }
    for key, (state, days) in {**included, **excluded}.items():
        add_draft(store, key, state=state, text=SEEN, days_ago=days, clock=clock)
    add_draft(store, "other-recipe", state=DraftState.PUBLISHED, text=SEEN, days_ago=1,
              clock=clock, recipe="release-notes")  # fmt: skip
    add_draft(store, "other-platform", state=DraftState.PUBLISHED, text=SEEN, days_ago=1,
              clock=clock, platform="blog")  # fmt: skip
    add_draft(store, "probe", state=DraftState.READY, text=REWORDED, days_ago=0, clock=clock)

    with store.transaction() as session:
        found = comparison_set(
            session,
            recipe=RECIPE,
            platform="linkedin",
            exclude="probe",
            since=clock.now() - timedelta(days=90),
        )

    assert {c.key for c in found} == set(included)


def test_the_newest_posts_are_the_ones_compared_past_the_cap(store: Store) -> None:
    clock = FrozenClock()
    for days in (1, 2, 3, 4):
        add_draft(store, f"published-{days}", state=DraftState.PUBLISHED, text=SEEN,
                  days_ago=days, clock=clock)  # fmt: skip
    add_draft(store, "approved-5", state=DraftState.APPROVED, text=SEEN, days_ago=5, clock=clock)
    add_draft(store, "approved-0", state=DraftState.APPROVED, text=SEEN, days_ago=0, clock=clock)

    with store.transaction() as session:
        found = comparison_set(
            session,
            recipe=RECIPE,
            platform="linkedin",
            exclude="probe",
            since=clock.now() - timedelta(days=90),
            limit=3,
        )

    assert [c.key for c in found] == ["approved-0", "published-1", "published-2"]


def test_drafts_waiting_past_the_cap_are_not_all_read_and_the_cap_holds_in_total(
    store: Store,
) -> None:
    """The query for drafts still waiting had no limit: a queue of thousands was read and
    scored under every store. Now the newest waiting ones fill the cap first."""
    clock = FrozenClock()
    for days in (1, 2, 3):
        add_draft(store, f"waiting-{days}", state=DraftState.READY, text=SEEN,
                  days_ago=days, clock=clock)  # fmt: skip
    add_draft(store, "published-1", state=DraftState.PUBLISHED, text=SEEN, days_ago=1,
              clock=clock)  # fmt: skip

    def compared(limit: int) -> list[str]:
        with store.transaction() as session:
            found = comparison_set(
                session,
                recipe=RECIPE,
                platform="linkedin",
                exclude="probe",
                since=clock.now() - timedelta(days=90),
                limit=limit,
            )
        return [c.key for c in found]

    assert compared(2) == ["waiting-2", "waiting-1"]
    assert compared(4) == ["waiting-3", "waiting-2", "waiting-1", "published-1"]


def test_the_closest_match_its_score_and_the_method_are_stored_on_the_draft(
    store: Store,
) -> None:
    clock = FrozenClock()
    add_draft(store, "seen", state=DraftState.PUBLISHED, text=SEEN, days_ago=3, clock=clock)
    add_draft(store, "other", state=DraftState.PUBLISHED, text=FRESH, days_ago=1, clock=clock)
    add_draft(store, "probe", state=DraftState.READY, text=REWORDED, days_ago=0, clock=clock)

    with store.transaction() as session:
        probe = session.get_one(DraftRow, "probe")
        record_similarity(session, probe, timedelta(days=90), clock.now())
    with store.transaction() as session:
        stored = session.get_one(DraftRow, "probe")

    assert stored.similar_to == "seen"
    assert stored.similar_score == similarity(REWORDED, SEEN)
    assert stored.similar_score is not None and stored.similar_score >= SIMILAR_WARN_DEFAULT
    assert stored.similar_method == SimilarityMethod.TOKEN_SET


def near_misses_of(text: str) -> list[str]:
    """`text` with one word replaced, for every word: each scores a point or two apart."""
    words = text.split()
    return [" ".join([*words[:i], f"zq{i}", *words[i + 1 :]]) for i in range(len(words))]


def test_the_closest_is_the_first_best_of_many_near_misses_with_its_text_as_stored() -> None:
    rng = random.Random(7)
    texts = [*near_misses_of(SEEN), SEEN]
    # the same words in another order, case and punctuation, twice: a tie the first must win
    texts += [f"{t.upper()}!! {' '.join(reversed(t.split()))}" for t in texts]
    rng.shuffle(texts)
    candidates = [Candidate(f"draft-{i}", t) for i, t in enumerate(texts * 2)]
    scores = [
        fuzz.token_set_ratio(REWORDED, c.text, processor=utils.default_process) for c in candidates
    ]
    first_best = candidates[scores.index(max(scores))]
    near = [s for s in scores if max(scores) - 3 <= s < max(scores)]
    assert len(near) > len(candidates) // 2  # the best stands a point above a crowd

    match = closest(REWORDED, candidates)

    assert match == Match(first_best.key, first_best.text, round(max(scores)))


# --- the settings --------------------------------------------------------------------------


def with_defaults(lines: str, **overrides: Any) -> str:
    return config_text(**overrides).replace("[defaults]\n", f"[defaults]\n{lines}\n")


def test_similarity_settings_have_defaults_and_are_validated() -> None:
    recipe = parse_config(config_text()).recipe(RECIPE)
    assert (recipe.similar_warn, recipe.similar_window, recipe.on_similar) == (
        SIMILAR_WARN_DEFAULT,
        timedelta(days=90),
        OnSimilar.WARN,
    )
    tuned = parse_config(
        with_defaults('similar_warn = 85\nsimilar_window = "30d"\non_similar = "redraft"')
    )
    assert tuned.recipe(RECIPE).similar_window == timedelta(days=30)

    with pytest.raises(ConfigError) as bad:
        parse_config(
            with_defaults('similar_warn = 0\nsimilar_window = "-1d"\non_similar = "rewrite"')
        )
    problems = "\n".join(bad.value.problems)
    for field in ("similar_warn", "similar_window", "on_similar"):
        assert f"[defaults]: {field}:" in problems


# --- drafting ------------------------------------------------------------------------------


def galley_for(
    store: Store, fake: FakeAnthropic, clock: FrozenClock, defaults: str = "", **overrides: Any
) -> tuple[Galley, Services]:
    drafter = AnthropicDrafter(api_key="test-key", base_url=fake.url)
    config = parse_config(with_defaults(defaults, **overrides))
    services = Services(config, store, drafter=drafter, clock=clock, backoff=FAST)
    return Galley.over(services), services


def approve_earlier_post(galley: Galley, services: Services, fake: FakeAnthropic) -> None:
    """The post people saw: the week before, drafted and approved."""
    fake.script(ok(text=SEEN))
    assert galley.draft(RECIPE, EARLIER).outcome == DraftOutcome.DRAFTED
    assert approve(services.store, services.config, services.clock, EARLIER_KEY).accepted


def later_draft(store: Store) -> DraftRow:
    with store.transaction() as session:
        return session.get_one(DraftRow, LATER_KEY)


def later_attempts(store: Store) -> list[AttemptRow]:
    with store.transaction() as session:
        query = select(AttemptRow).where(col(AttemptRow.run_id) == LATER_RUN)
        return list(session.exec(query.order_by(col(AttemptRow.number))).all())


def test_a_reworded_draft_is_stored_with_its_match_and_one_model_call(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    galley, services = galley_for(store, fake_anthropic, FrozenClock())
    approve_earlier_post(galley, services, fake_anthropic)
    fake_anthropic.script(ok(text=REWORDED))

    assert galley.draft(RECIPE, LATER).outcome == DraftOutcome.DRAFTED

    assert len(fake_anthropic.requests) == 2  # one for each week: warn only
    draft = later_draft(store)
    assert (draft.state, draft.text, draft.similar_to) == (DraftState.READY, REWORDED, EARLIER_KEY)
    assert draft.similar_score == similarity(REWORDED, SEEN)
    shown = galley.closest_seen(LATER_KEY)  # what `galley show` and a notebook read
    assert shown is not None
    assert (shown.draft_key, shown.state, shown.message) == (EARLIER_KEY, "approved", None)
    record = galley.recipe_record(RECIPE)
    assert (record.approved, record.decided, record.approval_rate) == (1, 1, 1.0)
    detail = galley.show(LATER_KEY)  # `galley show` prints it, and its --json carries it
    assert detail.draft is not None and detail.draft.similar_to == EARLIER_KEY
    printed = str(detail)
    assert "closest seen" in printed and f"{EARLIER_KEY}: {draft.similar_score}%" in printed
    assert detail.to_json()["draft"]["similar_score"] == draft.similar_score


def test_redraft_asks_once_more_avoiding_the_seen_text_and_keeps_the_fresher_answer(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    galley, services = galley_for(store, fake_anthropic, FrozenClock(), 'on_similar = "redraft"')
    approve_earlier_post(galley, services, fake_anthropic)
    fake_anthropic.script(ok(text=REWORDED), ok(text=FRESH))

    assert galley.draft(RECIPE, LATER).outcome == DraftOutcome.DRAFTED

    assert len(fake_anthropic.requests) == 3
    asked_again = fake_anthropic.requests[-1].body["messages"][0]["content"]
    assert asked_again.startswith("Write the weekly update for 23 November 2026.")
    assert SEEN in asked_again
    first, second = later_attempts(store)
    assert (first.redraft, second.redraft) == (False, True)
    assert (first.output_tokens, second.output_tokens) == (34, 34)  # both paid, both counted
    draft = later_draft(store)
    assert draft.text == FRESH
    assert draft.similar_score == similarity(FRESH, SEEN)


def test_redraft_keeps_the_first_answer_when_the_second_repeats_more(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    galley, services = galley_for(store, fake_anthropic, FrozenClock(), 'on_similar = "redraft"')
    approve_earlier_post(galley, services, fake_anthropic)
    fake_anthropic.script(ok(text=REWORDED), ok(text=SEEN))

    galley.draft(RECIPE, LATER)

    assert len(later_attempts(store)) == 2
    assert later_draft(store).text == REWORDED


def test_redraft_happens_at_most_once_per_slot_even_after_a_bump(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    galley, services = galley_for(store, fake_anthropic, FrozenClock(), 'on_similar = "redraft"')
    approve_earlier_post(galley, services, fake_anthropic)
    fake_anthropic.script(ok(text=REWORDED), ok(text=REWORDED), ok(text=REWORDED))
    galley.draft(RECIPE, LATER)
    galley.bump(RECIPE, actor="U0ADMIN")

    assert galley.draft(RECIPE, LATER).outcome == DraftOutcome.DRAFTED

    assert [a.redraft for a in later_attempts(store)] == [False, True, False]
    assert len(fake_anthropic.requests) == 4


@pytest.mark.parametrize(
    ("defaults", "max_attempts"),
    [('on_similar = "redraft"\nsimilar_warn = 95', 4), ('on_similar = "redraft"', 1)],
    ids=["below-similar_warn", "no-attempt-left"],
)
def test_redraft_does_not_call_again_below_the_threshold_or_past_max_attempts(
    store: Store, fake_anthropic: FakeAnthropic, defaults: str, max_attempts: int
) -> None:
    galley, services = galley_for(
        store, fake_anthropic, FrozenClock(), defaults, max_attempts=max_attempts
    )
    approve_earlier_post(galley, services, fake_anthropic)
    fake_anthropic.script(ok(text=REWORDED), ok(text=FRESH))

    assert galley.draft(RECIPE, LATER).outcome == DraftOutcome.DRAFTED

    assert len(fake_anthropic.requests) == 2
    assert later_draft(store).text == REWORDED


def test_redraft_does_not_spend_past_the_daily_token_budget(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    """Each call costs 46 tokens: the budget lets the second week draft, not re-draft."""
    galley, services = galley_for(
        store, fake_anthropic, FrozenClock(), 'on_similar = "redraft"\ndaily_token_budget = 90'
    )
    approve_earlier_post(galley, services, fake_anthropic)
    fake_anthropic.script(ok(text=REWORDED), ok(text=FRESH))

    assert galley.draft(RECIPE, LATER).outcome == DraftOutcome.DRAFTED

    assert len(fake_anthropic.requests) == 2
    assert later_draft(store).text == REWORDED


# --- what the review message is told -------------------------------------------------------


def test_the_review_item_names_the_match_only_from_the_recipes_similar_warn(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    clock = FrozenClock()
    galley, services = galley_for(store, fake_anthropic, clock)
    approve_earlier_post(galley, services, fake_anthropic)
    fake_anthropic.script(ok(text=REWORDED))
    galley.draft(RECIPE, LATER)
    item = load_item(store, LATER_KEY)
    assert item is not None

    shown = annotate(store, services.config, clock.now(), item)
    strict = annotate(store, parse_config(with_defaults("similar_warn = 95")), clock.now(), item)
    decided = load_item(store, EARLIER_KEY)
    assert decided is not None

    assert shown.similar is not None
    assert (shown.similar.draft_key, shown.similar.score) == (
        EARLIER_KEY,
        similarity(REWORDED, SEEN),
    )
    assert strict.similar is None  # the rewording scores below 95: no line
    assert shown.record is not None and shown.record.approved == 1
    assert annotate(store, services.config, clock.now(), decided) == decided  # no buttons, no facts


def test_the_recipe_record_counts_thirty_days_of_decisions_and_the_last_rejection(
    store: Store,
) -> None:
    clock = FrozenClock()
    drafts = [
        ("approved", DraftState.APPROVED, 5, None),
        ("published", DraftState.PUBLISHED, 29, None),
        ("rejected", DraftState.REJECTED, 2, "too salesy"),
        ("rejected-before", DraftState.REJECTED, 20, "too long"),
        ("expired", DraftState.EXPIRED, 1, None),
        ("waiting", DraftState.READY, 1, None),
        ("approved-long-ago", DraftState.APPROVED, 31, None),
    ]
    for key, state, days, reason in drafts:
        add_draft(store, key, state=state, text=SEEN, days_ago=days, clock=clock)
        if reason:
            with store.transaction() as session:
                session.get_one(DraftRow, key).decision_reason = reason

    with store.transaction() as session:
        record = recipe_record(session, RECIPE, clock.now())

    assert (record.approved, record.decided) == (2, 5)
    assert record.approval_rate == 0.4
    assert record.last_rejection_reason == "too salesy"
    assert record.last_rejected_at == clock.now() - timedelta(days=2)
