"""The cached token-set ratio (core/drafting/token_set.py) answers what rapidfuzz answers:
each score, and the choice `process.extractOne` makes, ties included."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz, process

from core.drafting.token_set import Words, best_of, token_set_ratio, words_of

PAIRS = Path(__file__).resolve().parents[1] / "data" / "similar_pairs.jsonl"
WORDS = ["alpha", "beta", "gamma", "release", "notes", "v2", "é", "東京", "x", "the"]
texts = st.lists(st.sampled_from([*WORDS, ",", "!", " ", "\n", "A", "Beta."]), max_size=25).map(
    " ".join
) | st.text(max_size=60)


def rapidfuzz_score(a: str, b: str, cutoff: float = 0) -> float:
    return fuzz.token_set_ratio(words_of(a).text, words_of(b).text, score_cutoff=cutoff)


def extract_one(query: str, choices: list[str]) -> tuple[float, int] | None:
    found = process.extractOne(
        words_of(query).text,
        [words_of(c).text for c in choices],
        scorer=fuzz.token_set_ratio,
        processor=None,
    )
    return None if found is None else (found[1], found[2])


def cached(choices: list[str]) -> list[Words]:
    return [words_of(c) for c in choices]


def test_each_labelled_pair_scores_as_rapidfuzz_scores_it() -> None:
    pairs = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line]
    for pair in pairs:
        a, b = words_of(pair["a"]), words_of(pair["b"])
        assert abs(token_set_ratio(a, b) - rapidfuzz_score(pair["a"], pair["b"])) < 1e-9


@settings(max_examples=300, deadline=None)
@given(texts, texts, st.sampled_from([0, 30, 50, 70, 90, 100]))
def test_any_two_texts_score_as_rapidfuzz_scores_them(a: str, b: str, cutoff: float) -> None:
    ours = token_set_ratio(words_of(a), words_of(b), cutoff)
    assert abs(ours - rapidfuzz_score(a, b, cutoff)) < 1e-9


@settings(max_examples=200, deadline=None)
@given(texts, st.lists(texts, max_size=12))
def test_the_best_choice_is_the_one_extract_one_makes(query: str, choices: list[str]) -> None:
    assert best_of(words_of(query), cached(choices)) == extract_one(query, choices)


def test_on_a_tie_the_first_choice_wins() -> None:
    choices = ["beta gamma notes", "gamma beta notes!", "alpha beta gamma", "beta gamma notes"]
    found = best_of(words_of("Beta, gamma: release notes."), cached(choices))
    assert found == extract_one("Beta, gamma: release notes.", choices)
    assert found is not None and found[1] == 0
