"""rapidfuzz's token-set ratio, over words split once per text.

`fuzz.token_set_ratio` splits, sorts and de-duplicates both texts' words at every
comparison: three quarters of a near-duplicate check that compares 500 texts
(bench/similarity.py). A recipe's posts are compared again at every check, so here each
text is split once (`words_of`, cached), and each comparison is rapidfuzz's own steps
(`rapidfuzz.fuzz_py.token_set_ratio`) on the cached words, with the lengths worked out
from the word sets and only the two differences joined for the Indel distance.

`best_of` answers what `process.extractOne(..., scorer=fuzz.token_set_ratio)` answers:
the first of the highest-scoring texts and rapidfuzz's own score for it. The cached
ratio only chooses the finalists (every text within `TIE` of the best); rapidfuzz scores
them, so a last-digit difference in float arithmetic can never change the answer.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from itertools import filterfalse
from math import ceil
from typing import NamedTuple

from rapidfuzz import fuzz, utils
from rapidfuzz.distance import Indel

TIE = 1e-6  # far above float error (1e-13), far below a score's resolution (1 / 600 chars)
CACHED_TEXTS = 2000  # four times the texts one check compares (MAX_COMPARED)


class Words(NamedTuple):
    """A text's distinct lower-cased words without punctuation, as the ratio reads it."""

    distinct: frozenset[str]
    ordered: tuple[str, ...]  # sorted
    letters: int  # the words' characters, separators not counted

    @property
    def text(self) -> str:
        """The words as one string: the ratio of two such strings is the texts' ratio."""
        return " ".join(self.ordered)


@functools.lru_cache(maxsize=CACHED_TEXTS)
def words_of(text: str) -> Words:
    ordered = tuple(sorted(set(utils.default_process(text).split())))
    return Words(frozenset(ordered), ordered, sum(map(len, ordered)))


class Split(NamedTuple):
    """What the ratio of two texts takes from their word sets alone, before any Indel
    distance: the joined lengths, the two ratios of the shared words to each text, and
    the most the Indel ratio of the differences could be (its distance is at least
    their length difference)."""

    ab_len: int
    ba_len: int
    lensum: int
    shared_ratio: float  # rapidfuzz's sect+ab and sect+ba ratios, the greater
    indel_bound: float


def split_of(a: Words, b: Words) -> Split | float:
    """The split of `a` against `b`, or the ratio itself when it needs no distance."""
    if not a.distinct or not b.distinct:
        return 0.0
    shared = a.distinct & b.distinct
    only_a, only_b = len(a.distinct) - len(shared), len(b.distinct) - len(shared)
    if shared and (not only_a or not only_b):
        return 100.0  # one text's words are all in the other's
    shared_letters = sum(map(len, shared))
    ab_len = a.letters - shared_letters + only_a - 1 if only_a else 0  # joined by spaces
    ba_len = b.letters - shared_letters + only_b - 1 if only_b else 0
    sect_len = shared_letters + len(shared) - 1 if shared else 0
    sect_ab_len = sect_len + (sect_len != 0) + ab_len
    sect_ba_len = sect_len + (sect_len != 0) + ba_len
    lensum = sect_ab_len + sect_ba_len
    shared_ratio = 0.0
    if sect_len:
        shared_ratio = max(
            100 - 100 * (1 + ab_len) / (sect_len + sect_ab_len),
            100 - 100 * (1 + ba_len) / (sect_len + sect_ba_len),
        )
    bound = 100 - 100 * abs(ab_len - ba_len) / lensum
    return Split(ab_len, ba_len, lensum, shared_ratio, bound)


def token_set_ratio(a: Words, b: Words, score_cutoff: float = 0) -> float:
    """`fuzz.token_set_ratio(a.text, b.text, score_cutoff=score_cutoff)`, step by step as
    rapidfuzz.fuzz_py computes it; 0 below `score_cutoff`."""
    split = split_of(a, b)
    score = split if isinstance(split, float) else _ratio(a, b, split, score_cutoff)
    return score if score >= score_cutoff else 0.0


def _ratio(a: Words, b: Words, split: Split, score_cutoff: float) -> float:
    """The greater of the shared-word ratios and the Indel ratio of the differences;
    the distance is skipped when its bound cannot reach the cutoff or beat the
    shared-word ratios (rapidfuzz's answer is then the same)."""
    bound = split.indel_bound
    if bound < score_cutoff or bound <= split.shared_ratio:
        return split.shared_ratio
    cutoff_distance = ceil(split.lensum * (1 - score_cutoff / 100))
    dist = Indel.distance(
        " ".join(filterfalse(b.distinct.__contains__, a.ordered)),
        " ".join(filterfalse(a.distinct.__contains__, b.ordered)),
        score_cutoff=cutoff_distance,
    )
    if dist > cutoff_distance:
        return split.shared_ratio
    return max(split.shared_ratio, 100 - 100 * dist / split.lensum)


def best_of(query: Words, choices: Sequence[Words]) -> tuple[float, int] | None:
    """(score, index) of the first choice that reads most like `query`, as
    `process.extractOne(query.text, [c.text for c in choices],
    scorer=fuzz.token_set_ratio, processor=None)` gives them; None without choices.

    Branch and bound: every choice's split first (the shared-word ratio is a floor of
    its score, the Indel bound a ceiling), then the distances, greatest ceiling first,
    until no ceiling left reaches the best score found."""
    if not choices:
        return None
    splits = [split_of(query, choice) for choice in choices]
    scores = [s if isinstance(s, float) else s.shared_ratio for s in splits]
    best = max(scores)
    undecided = [(i, s) for i, s in enumerate(splits) if not isinstance(s, float)]
    undecided.sort(key=lambda pair: -_ceiling(pair[1]))
    for index, split in undecided:
        if _ceiling(split) < best - TIE:
            break  # sorted: no choice left can come within a tie of the best
        scores[index] = _ratio(query, choices[index], split, max(best - TIE, 0.0))
        best = max(best, scores[index])
    finalists = [i for i, score in enumerate(scores) if score >= best - TIE]
    found: tuple[float, int] | None = None
    for index in finalists:  # rapidfuzz's own score decides, the first on a tie
        score = fuzz.token_set_ratio(query.text, choices[index].text, processor=None)
        if found is None or score > found[0]:
            found = (score, index)
    return found


def _ceiling(split: Split) -> float:
    return max(split.shared_ratio, split.indel_bound)
