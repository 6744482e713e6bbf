"""Near-duplicates: how much a fresh draft reads like one people already saw.

When a draft becomes `ready`, inside the transaction that stores it, it is compared with
the drafts of its recipe and platform that wait for review, and with those approved or
published within `similar_window`; the closest one, its score and the method are stored
on the draft, once. Never calls the model or Slack, and never compares more than
`MAX_COMPARED` texts, however long the history is.

The method is rapidfuzz's token-set ratio on lower-cased words without punctuation: a
rewording that keeps the facts and moves sentences around keeps its words, so it scores
high, while a post on the same topic with other news shares only the template. Measured
on tests/data/similar_pairs.jsonl by bench/similarity.py.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import sqlalchemy as sa
from rapidfuzz import fuzz, process, utils
from sqlmodel import Session, col, select

from core.drafting.claims import Claim
from core.drafting.gate import tokens_today
from core.drafting_policies import OnSimilar, SimilarityMethod
from core.identity import review_effect_key, slack_channel_of_publish_key
from core.models import AttemptRow, DraftRow, EffectRow, UTCDateTime
from core.ports import DraftRequest, MessageRef, ModelReply, SimilarPost
from core.post_body import BODY_MARK, PART_SEPARATOR, PostBody
from core.setup.config import Recipe
from core.states import DRAFT_APPROVED_STATES, DraftState, EffectState
from core.store.engine import Store
from core.store.rows import draft_row

METHOD = SimilarityMethod.TOKEN_SET
# A recipe posting five times a day for 90 days still fits; past that the oldest are
# left out, so one check costs at most this many comparisons (see bench/similarity.py).
MAX_COMPARED = 500


def similarity(text: str, other: str) -> int:
    """0-100: how much `text` reads like `other`; case, punctuation and order do not count."""
    return round(fuzz.token_set_ratio(text, other, processor=utils.default_process))


class Candidate(NamedTuple):  # a tuple, not a dataclass: hundreds are built per check
    key: str
    text: str


@dataclass(frozen=True)
class Match:
    key: str
    text: str
    score: int


@functools.cache
def _comparison_statement() -> Any:
    """The comparison set's one statement, built once and bound per call (building it
    anew cost more CPU than running it: bench/draft_overhead.py): a UNION ALL of one
    capped read per state."""
    same = (
        col(DraftRow.recipe) == sa.bindparam("recipe"),
        col(DraftRow.platform) == sa.bindparam("platform"),
        col(DraftRow.key) != sa.bindparam("exclude"),
    )
    columns = (col(DraftRow.key), col(DraftRow.text), col(DraftRow.updated_at))
    newest = (col(DraftRow.updated_at).desc(), col(DraftRow.key))
    cap = sa.bindparam("cap", type_=sa.Integer)
    parts = [
        sa.select(*columns, sa.literal(False).label("seen"))
        .where(*same, col(DraftRow.state) == DraftState.READY)
        .order_by(*newest)
        .limit(cap)
    ]
    parts += [  # one state per read: read in index order, stop at the cap
        sa.select(*columns, sa.literal(True).label("seen"))
        .where(
            *same,
            col(DraftRow.state) == state,
            col(DraftRow.updated_at) >= sa.bindparam("since", type_=UTCDateTime),
        )
        .order_by(*newest)
        .limit(cap)
        for state in sorted(DRAFT_APPROVED_STATES)
    ]
    every = sa.union_all(*(sa.select(part.subquery()) for part in parts)).subquery()
    # Ordered here, not in Python: the timestamp then stays in the database, unparsed.
    return sa.select(every.c.key, every.c.text, every.c.seen).order_by(
        every.c.updated_at.desc(), every.c.key
    )


def comparison_set(
    session: Session,
    *,
    recipe: str,
    platform: str,
    exclude: str,
    since: datetime,
    limit: int = MAX_COMPARED,
) -> list[Candidate]:
    """The texts a draft is compared with, at most `limit`: its recipe's and platform's
    drafts waiting for review (oldest first), then the newest approvals and publications
    since `since`.

    One statement: a UNION ALL of one capped read per state, each seeking
    ix_drafts_recipe_state_updated, so a long history costs nothing."""
    values = {"recipe": recipe, "platform": platform, "exclude": exclude, "since": since}
    statement, bound = _comparison_statement(), values | {"cap": limit}
    # plain rows through the connection: the ORM's result machinery cost a fifth of the
    # read for 500 rows (bench/similarity.py)
    newest_first = session.connection().execute(statement, bound).all()
    waiting = [Candidate(key, text) for key, text, seen in reversed(newest_first) if not seen]
    seen = [Candidate(key, text) for key, text, seen in newest_first if seen]
    return [c for c in [*waiting, *seen[: limit - len(waiting)]] if c.text]


@functools.lru_cache(maxsize=4 * MAX_COMPARED)
def distinct_words(text: str) -> str:
    """`text` as the token-set ratio reads it: its distinct lower-cased words without
    punctuation, sorted. The ratio depends on nothing else, so scores are unchanged, and a
    recipe's posts, compared again at every check, are split and sorted once while they
    stay in the cache (a fifth of the scoring: bench/similarity.py)."""
    return " ".join(sorted(set(utils.default_process(text).split())))


def closest(text: str, candidates: list[Candidate]) -> Match | None:
    """The candidate `text` reads most like (the first one on a tie), or None."""
    if not candidates or not text.strip():
        return None
    return closest_version(version_texts(text), candidates)


def closest_version(versions: list[str], candidates: list[Candidate]) -> Match | None:
    """The candidate one of `versions` reads most like (the first one on a tie), or None:
    each version of a set is compared (docs/design.md §30)."""
    if not candidates:
        return None
    choices = [distinct_words(readable(c.text)) for c in candidates]
    found = None
    for version in versions:
        closest_to_it = process.extractOne(
            distinct_words(version), choices, scorer=fuzz.token_set_ratio, processor=None
        )
        if closest_to_it is not None and (found is None or closest_to_it[1] > found[1]):
            found = closest_to_it
    if found is None:
        return None
    _, score, index = found
    best = candidates[index]
    return Match(best.key, readable(best.text), round(score))


def readable(text: str) -> str:
    """A stored draft as one plain text: every version and part of a set (its marked
    JSON never scored), a plain draft as it is."""
    return PostBody.parse(text).readable() if text.startswith(BODY_MARK) else text


def version_texts(text: str) -> list[str]:
    """Each version of a stored draft as one plain text, its parts blank-line apart."""
    if not text.startswith(BODY_MARK):
        return [text]
    return versions_of(PostBody.parse(text))


def versions_of(body: PostBody) -> list[str]:
    """Each version of a body as one plain text, its parts blank-line apart."""
    return [PART_SEPARATOR.join(parts) for parts in body.versions.values()]


def record_similarity(
    session: Session, draft: DraftRow, window: timedelta, now: datetime
) -> Match | None:
    """Read, score and store the closest draft people saw on `draft`, all in the
    caller's transaction."""
    candidates = comparison_set(
        session,
        recipe=draft.recipe,
        platform=draft.platform,
        exclude=draft.key,
        since=now - window,
    )
    match = closest(draft.text or "", candidates)
    note_similarity(session, draft, match)
    return match


def closest_seen(
    store: Store, recipe: Recipe, draft_key: str, body: PostBody, now: datetime
) -> Match | None:
    """The closest draft people saw to the model's answer `body`, read and scored before
    the write that stores the draft, so the write lock is not held while up to
    MAX_COMPARED texts are scored. A draft made ready in between is not compared: at
    worst a warning is missed, never a draft lost or stored twice (the write that makes
    it `ready` stores this result)."""
    with store.read_one() as session:
        candidates = comparison_set(
            session,
            recipe=recipe.name,
            platform=recipe.platform,
            exclude=draft_key,
            since=now - recipe.similar_window,
        )
    return closest_version(versions_of(body), candidates)


def note_similarity(session: Session, draft: DraftRow, match: Match | None) -> None:
    """Store `match` on `draft`, in the caller's transaction (the one that makes it ready)."""
    draft.similar_to = match.key if match else None
    draft.similar_score = match.score if match else 0
    draft.similar_method = METHOD
    session.add(draft)


@dataclass(frozen=True)
class RedraftReason:
    """Why a first answer is drafted once more: the text it repeats, and what it was
    compared with, so the second answer is scored against the same posts."""

    match: Match
    candidates: list[Candidate]

    def prefers(self, text: str) -> bool:
        """True when `text` reads less like what people saw than the first answer did."""
        if not text.strip():
            return False
        other = closest(text, self.candidates)
        return (other.score if other else 0) < self.match.score


def redraft_reason(
    store: Store, recipe: Recipe, claim: Claim, reply: ModelReply, now: datetime
) -> RedraftReason | None:
    """With `on_similar = "redraft"`: the match that makes the model worth asking again,
    or None (below `similar_warn`, the slot was already re-drafted once, or the day's
    token budget is spent)."""
    if recipe.on_similar != OnSimilar.REDRAFT:
        return None
    with store.transaction() as session:
        if redrafted(session, claim.run_id):
            return None
        budget = recipe.daily_token_budget
        spent = reply.input_tokens + reply.output_tokens  # not in the ledger until stored
        if budget and tokens_today(session, recipe, now) + spent >= budget:
            return None
        candidates = comparison_set(
            session,
            recipe=recipe.name,
            platform=recipe.platform,
            exclude=claim.draft_key,
            since=now - recipe.similar_window,
        )
    match = closest(reply.text, candidates)
    if match is None or match.score < recipe.similar_warn:
        return None
    return RedraftReason(match, candidates)


def redrafted(session: Session, run_id: str) -> bool:
    """Whether this slot already asked the model to avoid a near-duplicate (the attempts
    ledger says so, so a crash and a takeover do not ask twice)."""
    query = (
        select(sa.func.count())
        .select_from(AttemptRow)
        .where(col(AttemptRow.run_id) == run_id, col(AttemptRow.redraft).is_(True))
    )
    return bool(session.exec(query).one())


def avoiding(request: DraftRequest, earlier: str) -> DraftRequest:
    """The same request, told which text people already saw and must not read again."""
    prompt = (
        f"{request.prompt}\n\n"
        "People have already read the post below. Write one that does not repeat it: "
        "other points, other wording.\n\n"
        f"<already_seen>\n{earlier}\n</already_seen>"
    )
    return dataclasses.replace(request, prompt=prompt)


def similar_post(session: Session, draft: DraftRow, warn: int | None) -> SimilarPost | None:
    """What a review message says about the draft's closest match: None until checked,
    when nothing was close, or when the score is below `warn`."""
    if draft.similar_to is None or draft.similar_score is None:
        return None
    if warn is not None and draft.similar_score < warn:
        return None
    match = draft_row(session, draft.similar_to)
    if match is None:
        return None
    at = match.ready_at if match.state == DraftState.READY and match.ready_at else match.updated_at
    return SimilarPost(
        draft_key=match.key,
        score=draft.similar_score,
        method=draft.similar_method or METHOD,
        state=match.state,
        at=at,
        message=message_of(session, match.key),
    )


def message_of(session: Session, draft_key: str) -> MessageRef | None:
    """Where people saw a draft: its publication when it went to a Slack channel, else its
    review message; None when no receipt says."""
    receipts = session.exec(
        select(EffectRow).where(
            col(EffectRow.draft_key) == draft_key, col(EffectRow.state) == EffectState.SUCCEEDED
        )
    ).all()
    for receipt in receipts:
        channel = slack_channel_of_publish_key(receipt.key)
        if channel and receipt.external_id:
            return MessageRef(channel, receipt.external_id)
    for receipt in receipts:
        if receipt.key == review_effect_key(draft_key) and receipt.result:
            shown = json.loads(receipt.result)
            return MessageRef(str(shown["channel"]), str(shown["ts"]))
    return None
