"""Decisions and operations a person makes through the operator API (a notebook):
who is acting, whether they may, and which revision their decision binds to.

The permission rule is Slack's own (`core/review/permissions.py`) and the decision is Slack's
own (`core/review/queue.py` `decide` / `edit`): this module only says who, never bypasses a
check, and never writes anything itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from core.api.views import Answer, DraftDetail
from core.drafting.fit import FitRule
from core.errors import NotPermitted, RevisionRequired, UnknownRun
from core.identity import recipe_of_run, run_of_key
from core.policies import Role, Verdict
from core.ports import Clock, Directory
from core.review.approvals import stages_of
from core.review.permissions import has_role, may_review
from core.review.queue import ReviewAnswer, decide, edit
from core.review.unapproval import unapprove
from core.setup.approval_stages import ApprovalStage
from core.setup.config import Config, SlackSection
from core.store.engine import Store

if TYPE_CHECKING:
    from core.review.redraft_claims import RedraftClaim
    from core.review.redrafting import RedraftService

_WHO = "reading only: say who you are with GALLEY_USER or galley.connect(user='U…')"


class People:
    """The person a Galley was opened as (`as_person`: a notebook, `galley.connect`), or
    nobody (the CLI, the bot: the shell and Slack authenticate their own users and name
    the actor). A person who did not say who they are may read, not write."""

    def __init__(
        self, slack: SlackSection, directory: Directory, user: str | None, *, as_person: bool
    ) -> None:
        self.slack, self.directory, self.user = slack, directory, user
        self.as_person = as_person or user is not None

    def acting(self, actor: str | None, role: Role) -> str:
        """Who acts: the person (their `role` checked as Slack checks it), else `actor`."""
        if not self.as_person:
            if not actor:
                raise NotPermitted("say who is acting: actor=...")
            return actor
        if self.user is None:
            raise NotPermitted(_WHO)
        if actor and actor != self.user:
            raise NotPermitted(f"opened as {self.user}: cannot act as {actor}")
        if not has_role(self.slack, self.directory, self.user, role):
            raise NotPermitted(f"{self.user} is not one of this Galley's {role}s")
        return self.user

    def deciding(self, user: str | None, stages: Iterable[ApprovalStage] = ()) -> tuple[str, bool]:
        """Who decides, and whether they may review a draft of a recipe with these
        `stages` (`may_review`: an approver, or named by a stage). A refusal is
        `decide`'s to give, in the same words as a click in Slack."""
        person = self.user if self.as_person else user
        if not person:
            raise NotPermitted(_WHO if self.as_person else "say who is deciding: user=...")
        if user and person != user:
            raise NotPermitted(f"opened as {self.user}: cannot decide as {person}")
        return person, may_review(self.slack, self.directory, person, stages)


def bound_revision(draft: DraftDetail | str, revision: int | None) -> tuple[str, int]:
    """The draft key and the revision a person read: a decision binds to both."""
    if isinstance(draft, DraftDetail):
        if draft.key is None or draft.revision is None:
            raise UnknownRun(f"{draft.run.id} has no draft to decide on")
        return draft.key, revision if revision is not None else draft.revision
    if revision is None:
        raise RevisionRequired(
            "say which revision you read: approve(galley.show(key)) or approve(key, revision=N)"
        )
    return draft, revision


class Desk:
    """A person's approve, reject and edit: who decides, on which revision, with the
    permission Slack checks, through `core/review/queue.py`. The notebook and the bot's
    buttons both decide here."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock,
        people: People,
        fits: FitRule | None = None,
    ) -> None:
        self.store, self.config, self.clock, self.people = store, config, clock, people
        self.fits = fits  # an approval too long for a target is refused (core/drafting/fit.py)

    def decide(
        self,
        draft: DraftDetail | str,
        revision: int | None,
        verdict: Verdict,
        *,
        user: str | None,
        reason: str | None = None,
    ) -> ReviewAnswer:
        key, read, person, permitted = self._bound(draft, revision, user)
        return decide(
            self.store,
            self.config,
            self.clock,
            draft_key=key,
            revision=read,
            user=person,
            permitted=permitted,
            verdict=verdict,
            reason=reason,
            fits=self.fits,
            directory=self.people.directory,
        )

    def edit(
        self, draft: DraftDetail | str, text: str, revision: int | None, *, user: str | None
    ) -> ReviewAnswer:
        key, read, person, permitted = self._bound(draft, revision, user)
        return edit(
            self.store,
            self.config,
            self.clock,
            draft_key=key,
            revision=read,
            user=person,
            permitted=permitted,
            text=text,
        )

    def may_edit(self, user: str | None, draft_key: str) -> bool:
        """Whether `user` may edit the draft, by the rule `edit` applies (an approver, or
        named by a stage of its recipe): asked before work is done for them (an image
        they dropped is not downloaded unless they may)."""
        try:
            return self.people.deciding(user, self._stages(draft_key))[1]
        except NotPermitted:
            return False

    def ask_redraft(
        self,
        service: RedraftService,
        draft: DraftDetail | str,
        revision: int | None,
        note: str,
        *,
        user: str | None,
    ) -> RedraftClaim | ReviewAnswer:
        """A person's redraft of the revision they read, claimed (the caller runs it: on
        the bot's drafting pool, or at once in a notebook), or why not."""
        key, read, person, permitted = self._bound(draft, revision, user)
        return service.ask(
            draft_key=key, revision=read, note=note, user=person, permitted=permitted
        )

    def unapprove(
        self, draft: DraftDetail | str, revision: int | None, *, user: str | None
    ) -> ReviewAnswer:
        """Take an approval back while its draft waits for its slot (docs/design.md §23)."""
        key, read, person, permitted = self._bound(draft, revision, user)
        return unapprove(
            self.store,
            self.config,
            self.clock,
            draft_key=key,
            revision=read,
            user=person,
            permitted=permitted,
        )

    def _bound(
        self, draft: DraftDetail | str, revision: int | None, user: str | None
    ) -> tuple[str, int, str, bool]:
        """The draft key and revision read, who decides and whether they are an approver."""
        key, read = bound_revision(draft, revision)
        person, permitted = self.people.deciding(user, self._stages(key))
        return key, read, person, permitted

    def _stages(self, draft_key: str) -> list[ApprovalStage]:
        """The approval stages of the draft's recipe, read from its key (none for a key
        naming no run: `decide` refuses it as gone)."""
        run = run_of_key(draft_key)
        return [] if run is None else stages_of(self.config, recipe_of_run(run))


def as_answer(answer: ReviewAnswer) -> Answer:
    """The operator API's view of a decision."""
    state = answer.item.state if answer.item else None
    refusal = None if answer.refusal is None else str(answer.refusal)
    return Answer(answer.accepted, answer.message, answer.draft_key, state, refusal)
