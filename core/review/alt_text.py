"""Alt text proposed by the model for an image that joins a draft without one
(docs/design.md §32).

One model call per draft and image: its attempt row (cause `alt_text`, id
`core.identity.alt_text_key`) is inserted before the call and only the caller that
inserted it calls, so a redelivered drop, a second worker or a retry never pays twice;
the row is finished with the call's usage like every paid call, so the daily token budget
counts it. The model reads the draft's text and the image's context (a file's name and the
reviewer's words; a source image's caption or title); it is shown the pixels only when the
recipe sets `describe_images = true`.

The answer is written as the next revision only if the image still has no alt text at the
revision it lands on (read with the draft locked): a person's alt text always wins. A
failed call leaves the alt text empty, so the fit line still refuses approval, and says
so; it never blocks the draft.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlmodel import col, select

from core.drafting.attempts import finish_attempt_row
from core.drafting.gate import tokens_today
from core.drafting.revisions import model_author
from core.drafting_policies import AttemptCause
from core.errors import ModelCallFailed
from core.identity import alt_text_attempt_number, alt_text_key
from core.images.library import ImageLibrary
from core.models import AttemptRow, DraftRow
from core.policies import Refusal
from core.ports import Clock, Drafter, DraftRequest, ImageInput, ModelReply
from core.post_body import BODY_MARK, BodyUnreadable, ImageRef, PostBody
from core.review.queue import ReviewAnswer, open_for_change, save_revision
from core.setup.config import Config, Recipe
from core.sources.snapshot import stored_snapshot
from core.states import DraftState
from core.store.engine import Store, insert_ignore
from core.store.leases import lease_now

ALT_TEXT_SYSTEM = (
    "You write alt text for images in social media posts: what the image shows that a "
    "reader who cannot see it needs, in one or two plain sentences. Answer with the alt "
    "text only, without quotes or a preamble."
)
MAX_ALT_TOKENS = 300
MAX_ALT_CHARS = 1000  # within every platform's limit (Mastodon's descriptions: 1,500)
WORKER = "alt-text"
WRITE_TRIES = 3  # a revision that moved between the read and the lock is read again


@dataclass(frozen=True)
class AltProposal:
    """What a proposal did: the review answer of the revision it wrote (None when it wrote
    none) and what to tell the review thread ("" when there is nothing to say)."""

    answer: ReviewAnswer | None
    told: str


@dataclass(frozen=True)
class _Asked:
    """What the proposal is for, read once: the draft's run and recipe, and its text."""

    run_id: str
    recipe: Recipe
    text: str


class AltTextProposer:
    def __init__(
        self, store: Store, config: Config, clock: Clock, drafter: Drafter, library: ImageLibrary
    ) -> None:
        self.store, self.config, self.clock = store, config, clock
        self.drafter, self.library = drafter, library

    def propose(self, draft_key: str, image: ImageRef, context: str) -> AltProposal:
        """The image's alt text proposed once and written as the next revision while the
        image still has none."""
        asked = self._asked(draft_key, image)
        if asked is None:
            return AltProposal(None, "")
        claimed = self._claim(draft_key, image, asked)
        if isinstance(claimed, str):
            return AltProposal(None, f"No alt text was proposed for {image.name}: {claimed}.")
        if not claimed:
            return AltProposal(None, "")  # proposed already, or being proposed
        reply = self._call(draft_key, image, asked, context)
        if isinstance(reply, str):
            return AltProposal(None, f"No alt text was proposed for {image.name}: {reply}.")
        return self._write(draft_key, image, _alt_of(reply), reply.model)

    def propose_for_source_images(self, draft_key: str) -> list[AltProposal]:
        """Alt text proposed for each image the draft's run's source items brought that
        still has none (docs/design.md §32), the item's caption and title its context.
        Called once the draft's review message is posted: never under a claim, never
        inside a transaction."""
        with self.store.read() as session:
            draft = session.get(DraftRow, draft_key)
            if draft is None or draft.run_id is None:
                return []
            snapshot = stored_snapshot(session, draft.run_id)
        if snapshot is None:
            return []
        proposals = []
        for item in snapshot.items:
            image = item.image
            if image is None or image.sha256 is None:
                continue
            context = f"the image of the source item {item.title!r}; its caption: {image.caption}"
            proposals.append(self.propose(draft_key, ImageRef(image.sha256, image.name), context))
        return proposals

    def waiting_with_images(self) -> list[str]:
        """The drafts waiting for review whose body is a set (it may hold an image), oldest
        first: read from the review queue's index, never the history. A bot starting asks
        `propose_for_source_images` of each, so a proposal its predecessor died before
        asking is asked now; one asked already is claimed, and nothing is paid twice."""
        with self.store.read() as session:
            keys = session.exec(
                select(DraftRow.key)
                .where(
                    col(DraftRow.state) == DraftState.READY,
                    col(DraftRow.text).startswith(BODY_MARK),
                )
                .order_by(col(DraftRow.ready_at))
            ).all()
        return list(keys)

    def _asked(self, draft_key: str, image: ImageRef) -> _Asked | None:
        with self.store.read() as session:
            draft = session.get(DraftRow, draft_key)
            if draft is None or draft.text is None or draft.run_id is None:
                return None
            run_id, recipe_name, text = draft.run_id, draft.recipe, draft.text
        recipe = self.config.recipes.get(recipe_name)
        body = _body(text)
        if recipe is None or body is None or _alt_in(body, image.sha256) != "":
            return None
        return _Asked(run_id, recipe, body.readable())

    def _claim(self, draft_key: str, image: ImageRef, asked: _Asked) -> bool | str:
        """True when this caller may call; False when another has; why not, in words,
        when the recipe's daily token budget is spent."""
        budget = asked.recipe.daily_token_budget
        with self.store.transaction() as session:
            if budget:
                spent = tokens_today(session, asked.recipe, lease_now(session, self.clock))
                if spent >= budget:
                    return f"the daily_token_budget is spent ({spent} of {budget} tokens)"
            return insert_ignore(
                session,
                AttemptRow,
                id=alt_text_key(draft_key, image.sha256),
                run_id=asked.run_id,
                recipe=asked.recipe.name,
                draft_key=alt_text_key(draft_key, image.sha256),  # never a draft's attempts
                number=alt_text_attempt_number(image.sha256),
                worker=WORKER,
                model=asked.recipe.model,
                started_at=self.clock.now(),
                cause=AttemptCause.ALT_TEXT.value,
            )

    def _call(
        self, draft_key: str, image: ImageRef, asked: _Asked, context: str
    ) -> ModelReply | str:
        request = DraftRequest(
            model=asked.recipe.model,
            system=ALT_TEXT_SYSTEM,
            prompt=alt_text_prompt(asked.text, image.name, context),
            max_tokens=MAX_ALT_TOKENS,
            timeout=asked.recipe.model_timeout,
            recipe=asked.recipe.name,
            images=self._pixels(image) if asked.recipe.describe_images else (),
        )
        began = time.monotonic()
        failure: ModelCallFailed | None = None
        reply: ModelReply | None = None
        try:
            reply = self.drafter.draft(request)
        except ModelCallFailed as exc:
            failure = exc
        latency_ms = int((time.monotonic() - began) * 1000)
        with self.store.transaction() as session:
            row_id = alt_text_key(draft_key, image.sha256)
            values = {"finished_at": self.clock.now(), "latency_ms": latency_ms}
            finish_attempt_row(session, row_id, values, failure=failure, reply=reply)
        if reply is None or not _alt_of(reply):
            return "the model gave no text" if failure is None else f"the model failed ({failure})"
        return reply

    def _pixels(self, image: ImageRef) -> tuple[ImageInput, ...]:
        stored = self.library.get(image.sha256)
        if stored is None:
            return ()
        return (ImageInput(stored.facts.media_type, stored.data),)

    def _write(self, draft_key: str, image: ImageRef, alt: str, model: str) -> AltProposal:
        for _ in range(WRITE_TRIES):
            written = self._write_once(draft_key, image, alt, model)
            if written is not None:
                return written
        return AltProposal(None, "")

    def _write_once(
        self, draft_key: str, image: ImageRef, alt: str, model: str
    ) -> AltProposal | None:
        """The alt text written at the current revision, with the draft locked; None when
        a revision landed between the read and the lock (read again)."""
        with self.store.transaction() as session:
            draft = session.get(DraftRow, draft_key)
            if draft is None:
                return AltProposal(None, "")
            now = lease_now(session, self.clock)
            found = open_for_change(session, draft_key, draft.revision, self.config, now)
            if isinstance(found, ReviewAnswer):
                return None if found.refusal is Refusal.EDITED else AltProposal(None, "")
            locked, run = found
            body = _body(locked.text or "")
            if body is None or _alt_in(body, image.sha256) != "":
                return AltProposal(None, "")  # a person described it, or removed it
            images = [_described(i, image.sha256, alt) for i in body.images]
            text = body.with_images(images).to_text()
            editor = model_author(model)
            answer = save_revision(session, locked, run, text=text, editor=editor, at=now)
        told = f"Alt text proposed for {image.name}: check it with Edit before approving."
        return AltProposal(answer, told)


def alt_text_prompt(text: str, name: str, context: str) -> str:
    """What the model reads: the post, the image's name and what came with it."""
    lines = ["The post:", text, "", f"The image: {name}"]
    if context.strip():
        lines.append(f"What came with it: {context.strip()}")
    return "\n".join(lines)


def _alt_of(reply: ModelReply) -> str:
    return reply.text.strip().strip('"').strip()[:MAX_ALT_CHARS]


def _body(text: str) -> PostBody | None:
    try:
        return PostBody.parse(text)
    except BodyUnreadable:
        return None


def _alt_in(body: PostBody, sha256: str) -> str | None:
    """The image's alt text in `body`; None when the body does not hold the image."""
    return next((i.alt for i in body.images if i.sha256 == sha256), None)


def _described(image: ImageRef, sha256: str, alt: str) -> ImageRef:
    return ImageRef(image.sha256, image.name, alt) if image.sha256 == sha256 else image
