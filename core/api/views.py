"""What the operator API returns: read models of status, runs, drafts, history, the cost
ledger and the effect ledger, each renderable as HTML (Jupyter), text (a terminal),
JSON (`--json`) and a DataFrame (`.to_frame()`).

Pure values: no database, no Slack. `core/api/queries.py` fills them from the store.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.api.status_views import RecipeStatus as RecipeStatus
from core.api.status_views import Status as Status
from core.api.status_views import describe_poll as describe_poll
from core.api.status_views import item_label as item_label
from core.policies import EffectStep, FailReason
from core.post_body import PostBody
from core.publishing.target_outcomes import (
    ReceiptFacts,
    TargetOutcome,
    outcomes_sentence,
    target_outcomes,
)
from core.render import (
    Printable,
    Rows,
    cell_text,
    fact_lines,
    html_block,
    html_table,
    jsonable,
)
from core.sources.items import SourceItem
from core.states import RUN_SETTLED_BY_PEOPLE, RunState


@dataclass(frozen=True, slots=True)
class RunSummary:
    id: str
    recipe: str
    slot: str
    state: str
    reason: str | None
    draft_key: str | None
    # every model call for the run (`model_calls_of_run`), shown as "model calls"; the
    # key stays `attempts`: --json and the notebook's columns only ever gain keys
    attempts: int
    item_title: str | None = None  # an item run's item (docs/design.md §29): its title
    item_link: str | None = None  # and its link

    def label(self) -> str:
        """The run as people read it: its id, and an item run's title and link."""
        if self.item_title is None:
            return self.id
        return f"{self.id} {item_label(self.item_title, self.item_link)}"


class RunList(Rows[RunSummary]):
    title = "runs"
    row_type = RunSummary
    sparse_columns = ("item_title", "item_link")  # docs/design.md §29


@dataclass(frozen=True)
class DraftSummary:
    """One draft in a list: enough to choose which to read."""

    key: str
    run: str
    recipe: str
    platform: str
    slot: str
    version: int
    state: str
    revision: int
    ready_at: datetime | None
    waiting_hours: float | None
    preview: str


class DraftList(Rows[DraftSummary]):
    title = "drafts"
    row_type = DraftSummary


@dataclass(frozen=True)
class EventView:
    at: datetime
    subject: str
    subject_id: str
    run_id: str | None
    from_state: str | None
    to_state: str
    actor: str
    reason: str | None


class EventList(Rows[EventView]):
    title = "events"
    row_type = EventView
    columns = ("at", "subject", "subject_id", "from_state", "to_state", "actor", "reason")


@dataclass(frozen=True)
class AttemptView:
    """One model call from the cost ledger; `cause` says why it did not succeed."""

    id: str
    run_id: str
    recipe: str
    draft_key: str
    number: int
    model: str
    started_at: datetime
    outcome: str | None
    http_status: int | None
    cause: str | None
    latency_ms: int | None  # a batch entry's: from its entry to its batch's end (the wait)
    input_tokens: int
    output_tokens: int
    est_cost_usd: float  # at the batch price for a batch entry, cache writes at its TTL
    made_for: str = "draft"  # an AttemptCause: a slot's draft, or a reviewer's redraft
    mode: str = "sync"  # a Drafting: one synchronous call, or an entry of a Message Batch
    batch_id: str | None = None  # the API's id of the batch that carried it


class AttemptList(Rows[AttemptView]):
    title = "attempts"
    row_type = AttemptView


@dataclass(frozen=True)
class EffectView:
    """One receipt from the effect ledger, with the destination's id once it is known."""

    key: str
    draft_key: str
    step: str
    state: str
    external_id: str | None
    detail: str | None
    tries: int
    updated_at: datetime
    url: str | None = None  # a publication's public URL, kept in its receipt
    # a publication's read-back state: verified, gone, not read yet (docs/design.md §28)
    read_back: str | None = None


class EffectList(Rows[EffectView]):
    title = "effects"
    row_type = EffectView


@dataclass(frozen=True)
class Revision:
    revision: int
    written_by: str
    written_at: datetime | None
    text: str


class RevisionList(Rows[Revision]):
    title = "revisions"
    row_type = Revision


@dataclass(frozen=True)
class SourceItemView:
    """One item of a run's snapshot (docs/design.md §27): what the model was shown."""

    source: str
    title: str
    link: str | None
    published_at: datetime | None  # None: undated, new the first time the recipe saw it
    chars: int  # length of its text as stored (the prompt caps the total: max_source_chars)
    item_id: str
    content_hash: str

    @classmethod
    def of(cls, item: SourceItem) -> SourceItemView:
        return cls(
            item.source,
            item.title,
            item.link,
            item.published_at,
            len(item.text),
            item.item_id,
            item.content_hash,
        )


class SnapshotList(Rows[SourceItemView]):
    title = "sources"
    row_type = SourceItemView
    columns = ("source", "title", "link", "published_at", "chars")


@dataclass(frozen=True)
class DraftInfo:
    key: str
    state: str
    revision: int
    text: str
    platform: str
    version: int
    model: str | None
    input_tokens: int
    output_tokens: int
    est_cost_usd: float  # every attempt for this draft, failed ones too
    ready_at: datetime | None
    decided_by: str | None
    decided_at: datetime | None
    decision_reason: str | None
    similar_to: str | None = None  # the draft people saw that this one reads most like
    similar_score: int | None = None  # percent, checked when the draft became ready
    similar_method: str | None = None


@dataclass(frozen=True)
class DraftDetail(Printable):
    """Everything about one draft (or one run's current draft): what `galley show` prints.

    `revision` is what an approval binds to: `galley.approve(detail)` approves exactly
    the text shown here, and is refused if it changed since.
    """

    run: RunSummary
    draft: DraftInfo | None
    revisions: RevisionList = field(default_factory=RevisionList)
    decisions: EventList = field(default_factory=EventList)
    attempts: AttemptList = field(default_factory=AttemptList)
    effects: EffectList = field(default_factory=EffectList)
    feedback: str | None = None  # what reviewers said about the recipe lately (docs/design.md §22)
    sources: SnapshotList = field(default_factory=SnapshotList)  # the snapshot (docs/design.md §27)
    sources_left_out: tuple[str, ...] = ()  # optional sources not read: "name: answer"

    @property
    def key(self) -> str | None:
        return self.draft.key if self.draft else None

    @property
    def revision(self) -> int | None:
        return self.draft.revision if self.draft else None

    @property
    def text(self) -> str:
        return self.draft.text if self.draft else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "run": jsonable(self.run),
            "draft": jsonable(self.draft),
            "revisions": self.revisions.to_json(),
            "decisions": self.decisions.to_json(),
            "attempts": self.attempts.to_json(),
            "effects": self.effects.to_json(),
            "sources": self.sources.to_json(),
            "sources_left_out": list(self.sources_left_out),
        } | ({"feedback": self.feedback} if self.feedback is not None else {})

    def attention(self) -> str | None:
        """A sentence for a run a person must settle, or None."""
        if self.run.state not in RUN_SETTLED_BY_PEOPLE:
            return None
        run = self.run.id
        if self.run.state == RunState.UNCERTAIN:
            return (
                f"Needs a person: {run} may or may not have been published. Look at the "
                f"destination, then galley.resolve({run!r}, 'published' or 'absent'), "
                f"galley.retry({run!r}) or galley.cancel({run!r})."
            )
        if self._failed_publishing():  # the draft stands: a retry publishes what did not go
            said = outcomes_sentence(self._target_outcomes())
            return (
                f"Needs a person: {run} failed publishing ({self.run.reason}). {said} Fix the "
                f"cause, then galley.retry({run!r}) publishes to the targets that have not."
            )
        cause = (self.attempts[-1].cause if self.attempts else None) or self.run.reason
        return f"Needs a person: {run} failed ({cause}). galley.retry({run!r}) drafts it again."

    def _failed_publishing(self) -> bool:
        try:
            return not FailReason(self.run.reason or "").while_drafting
        except ValueError:
            return False

    def _facts(self) -> list[tuple[str, Any]]:
        run, draft = self.run, self.draft
        facts: list[tuple[str, Any]] = [
            ("run", run.id),
            ("run state", f"{run.state}" + (f" ({run.reason})" if run.reason else "")),
        ]
        if draft is not None:
            facts += [
                ("draft", draft.key),
                ("draft state", draft.state),
                ("revision", draft.revision),
                ("model", draft.model),
                ("tokens in/out", f"{draft.input_tokens}/{draft.output_tokens}"),
                ("estimated cost (USD)", f"{draft.est_cost_usd:.4f}"),
                ("ready at", draft.ready_at),
                (
                    "decided",
                    f"{draft.decided_by} at {cell_text(draft.decided_at)}"
                    if draft.decided_by
                    else "",
                ),
                ("decision reason", draft.decision_reason),
            ]
            links = [e.url for e in self.effects if e.url]
            if links:
                facts.append(("published at", " · ".join(links)))
            targets = self._target_outcomes()
            if targets:  # each target: published, not known, or not published, and why
                facts.append(("targets", " · ".join(target.said() for target in targets)))
            if draft.similar_to:
                facts.append(
                    (
                        "closest seen",
                        f"{draft.similar_to}: {draft.similar_score}% ({draft.similar_method})",
                    )
                )
        if self.feedback:
            facts.append(("reviewers said", self.feedback))
        if self.sources_left_out:
            facts.append(("sources left out", " · ".join(self.sources_left_out)))
        return facts

    def _target_outcomes(self) -> list[TargetOutcome]:
        publish = (e for e in self.effects if e.step == EffectStep.PUBLISH)
        return target_outcomes(ReceiptFacts(e.key, e.state, e.detail, e.url) for e in publish)

    def _repr_html_(self) -> str:
        parts = []
        warning = self.attention()
        if warning:
            parts.append(html_block("p", warning, **{"class": "galley-alert"}))
        parts.append(html_table("draft", ("", ""), self._facts()))
        if self.draft is not None:
            printed = printed_text(self.draft.text, plain_heading="")  # a set: headed parts
            parts.append(html_block("pre", printed, **{"class": "galley-draft"}))
        for part in (self.sources, self.revisions, self.decisions, self.attempts, self.effects):
            if part:
                parts.append(part._repr_html_())
        return '<div class="galley-show">' + "".join(parts) + "</div>"

    def __str__(self) -> str:
        return self.rendered()

    def rendered(self, width: int | None = None) -> str:
        """What `galley show` prints; `width` the terminal's columns, which no line of
        the facts or the tables then passes (the draft's own text is printed as is)."""
        parts = [fact_lines(self._facts(), width)]
        warning = self.attention()
        if warning:
            parts.insert(0, textwrap.fill(warning, width) if width else warning)
        if self.draft is not None:
            parts.append(printed_text(self.draft.text))
        tables = (self.sources, self.revisions, self.decisions, self.attempts, self.effects)
        parts += [part.rendered(width) for part in tables if part]
        return "\n\n".join(parts)


@dataclass(frozen=True)
class Answer(Printable):
    """What a decision from the API came to: whether it counted, and why not."""

    accepted: bool
    message: str
    draft_key: str
    state: str | None
    refusal: str | None = None  # why it did not count (`core.policies.Refusal`)

    def _repr_html_(self) -> str:
        return html_block("p", self.message, **{"class": "galley-answer"})

    def __str__(self) -> str:
        return self.message


def printed_text(text: str, plain_heading: str = "--- text ---\n") -> str:
    """A draft's text as `galley show` prints it: a plain draft as it is, after
    `plain_heading`; a set (docs/design.md §30) each version and thread part under its
    own heading."""
    body = PostBody.parse(text)
    if body.is_single():
        return plain_heading + text
    return "\n\n".join(f"--- {label} ---\n{part}" for label, part in body.labelled_parts())
