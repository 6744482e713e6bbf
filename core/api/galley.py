"""The operator API: the facade the README documents, what the CLI and a notebook call.

    >>> import galley                          # the notebook's import (see galley/)
    >>> g = galley.connect(user="U0EDITOR")    # GALLEY_CONFIG, GALLEY_DATABASE_URL
    >>> g.status()                             # renders as a table in Jupyter
    >>> d = g.show(g.drafts()[0].key)          # one draft: text, revisions, ledger
    >>> g.approve(d)                           # exactly the revision shown, if still fresh

Knows nothing of Slack. Every change names its actor, which lands in the event rows.
Reads need no running bot. Writes go through the same core functions and permission
rules as Slack's buttons and `/galley`: a Galley opened as a person (`user=`) may
decide drafts only as an approver and run Galley only as an admin. The CLI opens it
without a person: the shell authenticates its user. The bot does not use it: its
listeners, Home tab and scheduler take the container in `bot/wiring.py`.
Its reads (status, history, one draft, feedback, calendar, stats, report) are inherited
from `core/api/galley_reads.py`; read models and rendering live in `core/api/views.py`,
queries in `core/api/queries.py`, plots in `core/api/plots.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from core.api.galley_reads import GalleyReads
from core.api.services import Services
from core.api.views import Answer, DraftDetail, RecipeStatus, RunSummary, Status
from core.errors import SlotError
from core.identity import CLI_ACTOR
from core.policies import Finding, Role, Trigger, Verdict
from core.ports import Clock, Directory, Drafter
from core.scheduling.recipe_changes import ALL
from core.setup.config import Config
from core.setup.settings import Settings
from core.store.engine import Store

if TYPE_CHECKING:  # loaded by the operations that use them: reads stay light
    from core.api.desk import Desk
    from core.api.item_preview import ItemsPreview
    from core.api.plans import PlanImport
    from core.api.source_preview import SourcesPreview
    from core.drafting.attempts import Backoff
    from core.drafting.claims import DraftResult
    from core.review.person_posts import Written
    from core.scheduling.bumps import Bumped
    from core.scheduling.items import PollResult

__all__ = ["ALL", "Galley", "RecipeStatus", "RunSummary", "Status"]


class Galley(GalleyReads):
    """One config and one database, with the operations people ask for (its reads from
    `GalleyReads`). Its services (drafting, settling runs, recipe changes) are
    `core/api/services.py`'s, private here."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        drafter: Drafter | None = None,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        user: str | None = None,
        directory: Directory | None = None,
        as_person: bool = False,
        services: Services | None = None,
    ) -> None:
        """`services`: share a container already built (a test's, the bot's)."""
        self._services = services or Services(
            config, store, drafter=drafter, clock=clock, backoff=backoff, directory=directory
        )
        self._user = user  # the person acting, when opened as one (a notebook)
        self._people = self._services.people(user, as_person=as_person or user is not None)

    @classmethod
    def over(
        cls, services: Services, *, user: str | None = None, as_person: bool = False
    ) -> Galley:
        """The facade over a container already built (the bot's, a test's)."""
        return cls(
            services.config, services.store, user=user, as_person=as_person, services=services
        )

    @classmethod
    def from_settings(
        cls,
        settings: Settings | None = None,
        *,
        clock: Clock | None = None,
        user: str | None = None,
        directory: Directory | None = None,
        as_person: bool = False,
        existing_database: bool = False,
    ) -> Galley:
        """`clock` is for tests and replays; the CLI uses the system clock. `user` opens
        it as a person (a notebook): their permissions are checked. `existing_database`:
        refuse a SQLite file that is not there rather than create an empty one."""
        services = Services.from_settings(
            settings or Settings(),
            clock=clock,
            directory=directory,
            existing_database=existing_database,
        )
        return cls.over(services, user=user, as_person=as_person)

    def __repr__(self) -> str:
        return f"<Galley {self.opened}>"

    @property
    def opened(self) -> str:
        """Which config and database this is, and who acts: one line."""
        config, store = self._services.config, self._services.store
        where = "config" if config.path is None else str(config.path)
        recipes = f"{len(config.recipes)} recipe" + ("" if len(config.recipes) == 1 else "s")
        database = store.engine.url.render_as_string(hide_password=True)
        if self._user is not None:
            who = f"as {self._user}"
        elif self._people.as_person:
            who = "read only (GALLEY_USER is not set)"
        else:
            who = "as the operator"
        return f"{where} ({recipes}), database {database}, {who}"

    def _acting(self, actor: str | None, role: Role) -> str:
        """Who acts: the person this Galley was opened as (their `role` checked with the
        same rule as Slack), or else the `actor` the CLI names."""
        return self._people.acting(actor, role)

    @property
    def _desk(self) -> Desk:
        return self._services.desk(self._people)

    def draft(
        self,
        recipe_name: str,
        slot: str | datetime | None = None,
        *,
        actor: str | None = None,
        batch: bool = False,
    ) -> DraftResult:
        """Draft one slot now: a person's explicit request, so misfire_grace does not apply.
        `batch`: send it through a Message Batch instead (`batched`; `galley run` stores it)."""
        actor = self._acting(actor, Role.ADMIN) if actor or self._people.as_person else CLI_ACTOR
        services = self._services
        recipe = services.recipe(recipe_name)
        if recipe.trigger == Trigger.ITEMS:  # its runs are its items': docs/design.md §29
            raise SlotError(f"{recipe.name} drafts each new item: `galley poll {recipe.name}`")
        resolved = services.resolve_slot(recipe, slot)
        return services.drafting.draft_slot(
            recipe, resolved, manual=True, actor=actor, batch=batch or None
        )

    def poll(self, recipe_name: str, *, actor: str | None = None) -> PollResult:
        """An items recipe's poll now (docs/design.md §29): its new items recorded and its
        waiting items drafted, oldest first (`galley poll`, `/galley run`)."""
        if actor or self._people.as_person:
            self._acting(actor, Role.ADMIN)
        services = self._services
        recipe = services.recipe(recipe_name)
        if recipe.trigger != Trigger.ITEMS:
            said = f'{recipe.name} has no trigger = "items": `galley draft {recipe.name}`'
            raise SlotError(said)
        return services.items.poll(recipe, services.resolve_slot(recipe, None))

    def sources(
        self, recipe_name: str, slot: str | datetime | None = None
    ) -> SourcesPreview | ItemsPreview:
        """What the run of `recipe_name` at `slot` (default: the latest due) would read,
        read now: `galley sources`. Drafts nothing, stores nothing (docs/design.md §27).
        An items recipe: what its next poll would find new (docs/design.md §29)."""
        from core.api.item_preview import preview_items
        from core.api.source_preview import preview_sources
        from core.drafting.basis import SourceAccess

        services = self._services
        recipe = services.recipe(recipe_name)
        if recipe.trigger == Trigger.ITEMS:
            if slot is not None:
                raise SlotError(f"{recipe.name}: an items recipe's runs are its items: no --slot")
            access = SourceAccess.of(services.config)
            return preview_items(services.store, recipe, access, services.clock.now())
        resolved = services.resolve_slot(recipe, slot)
        return preview_sources(recipe, resolved, SourceAccess.of(services.config))

    def bump(self, recipe_name: str, *, actor: str | None = None, reason: str | None = None) -> int:
        """New version: the only way to a second draft for a slot that has one; returns
        the version (`bump_recipe` also says what became of the waiting drafts)."""
        return self.bump_recipe(recipe_name, actor=actor, reason=reason).version

    def bump_recipe(
        self, recipe_name: str, *, actor: str | None = None, reason: str | None = None
    ) -> Bumped:
        """New version. Drafts of older versions still waiting for review are superseded
        (they leave the review queue) and their runs return to `pending`, to be drafted
        at the new version whatever their age (a person's request)."""
        actor = self._acting(actor, Role.ADMIN)
        return self._services.recipes.bump(recipe_name, actor=actor, reason=reason)

    def pause(
        self, target: str, *, actor: str | None = None, reason: str | None = None
    ) -> list[str]:
        actor = self._acting(actor, Role.ADMIN)
        return self._services.recipes.pause(target, actor=actor, reason=reason)

    def resume(self, target: str, *, actor: str | None = None) -> list[str]:
        return self._services.recipes.resume(target, actor=self._acting(actor, Role.ADMIN))

    def resolve(self, run_id: str, finding: Finding | str, *, actor: str | None = None) -> str:
        actor = self._acting(actor, Role.ADMIN)
        return self._services.resolver.resolve(run_id, Finding(finding), actor=actor)

    def retry(self, run_id: str, *, actor: str | None = None) -> str:
        """A failed draft: draft the slot again now, a person's explicit request like
        `galley draft` of that slot (no bump; pause and backpressure still apply). An
        uncertain publication: try it once more, under the same key. What happened, in
        plain text (`Services.retry` routes it, for every surface)."""
        done = self._services.retry(run_id, actor=self._acting(actor, Role.ADMIN))
        return done if isinstance(done, str) else plain_description(done)

    def skip(self, run_id: str, *, actor: str | None = None) -> str:
        """Give up on a failed run's slot (the alert's Skip button)."""
        return self._services.resolver.skip(run_id, actor=self._acting(actor, Role.ADMIN))

    def cancel(self, run_id: str, *, actor: str | None = None) -> str:
        return self._services.resolver.cancel(run_id, actor=self._acting(actor, Role.ADMIN))

    def approve(
        self, draft: DraftDetail | str, revision: int | None = None, *, user: str | None = None
    ) -> Answer:
        """Approve exactly the revision read (a `show()` result carries it). Refused,
        changing nothing, if the draft was edited, bumped, expired or decided since."""
        from core.api.desk import as_answer

        return as_answer(self._desk.decide(draft, revision, Verdict.APPROVED, user=user))

    def reject(
        self,
        draft: DraftDetail | str,
        revision: int | None = None,
        *,
        reason: str | None = None,
        user: str | None = None,
    ) -> Answer:
        from core.api.desk import as_answer

        decision = self._desk.decide(draft, revision, Verdict.REJECTED, user=user, reason=reason)
        return as_answer(decision)

    def edit(
        self,
        draft: DraftDetail | str,
        text: str,
        revision: int | None = None,
        *,
        user: str | None = None,
    ) -> Answer:
        """Save `text` as the next revision of the revision read; approvals bind to
        revisions, so an approval of the old text no longer counts."""
        from core.api.desk import as_answer

        return as_answer(self._desk.edit(draft, text, revision, user=user))

    def redraft(
        self,
        draft: DraftDetail | str,
        note: str,
        revision: int | None = None,
        *,
        user: str | None = None,
    ) -> Answer:
        """Redraft: ask the model for the next revision of the revision read, with `note` saying
        what to change; one model call however often it is asked (docs/design.md §22)."""
        from core.api.desk import as_answer
        from core.review.redraft_claims import RedraftClaim

        claimed = self._desk.ask_redraft(
            self._services.redrafting, draft, revision, note, user=user
        )
        if isinstance(claimed, RedraftClaim):
            return as_answer(self._services.redrafting.run(claimed))
        return as_answer(claimed)

    def post(
        self,
        recipe_name: str,
        text: str,
        at: str | datetime | None = None,
        *,
        targets: Mapping[str, str] | None = None,
        post_id: str | None = None,
        actor: str | None = None,
    ) -> Written:
        """A person's own post (docs/design.md §37): `text` for every target (`targets`:
        a text of its own for some), at the same review as a model's draft, published at
        `at` (an ISO time; none: once approved), exactly once; no model call. `post_id`
        names it; without one the same post written twice is one run."""
        from core.api.posts import PostDraft, write_post

        actor = self._acting(actor, Role.ADMIN) if actor or self._people.as_person else CLI_ACTOR
        draft = PostDraft(recipe_name, text, dict(targets or {}), at, post_id)
        return write_post(self._services, draft, actor=actor)

    def import_plan(
        self, path: str | Path, *, skip_bad: bool = False, actor: str | None = None
    ) -> PlanImport:
        """A plan imported (docs/design.md §37): every row checked first, each a person's
        post at review; nothing added while a row is bad unless `skip_bad`."""
        from core.api.plans import import_plan

        actor = self._acting(actor, Role.ADMIN) if actor or self._people.as_person else CLI_ACTOR
        return import_plan(self._services, Path(path), actor=actor, skip_bad=skip_bad)

    def run_now(self, recipe_name: str) -> DraftResult | PollResult:
        """`/galley run`: draft the recipe's most recent slot now; an items recipe's source
        is polled now (docs/design.md §29)."""
        if self._services.recipe(recipe_name).trigger == Trigger.ITEMS:
            return self.poll(recipe_name)
        return self.draft(recipe_name)


def plain_description(result: DraftResult) -> str:
    """`DraftResult.describe()` without its Slack markup, for a terminal or a notebook."""
    why = result.detail or result.reason
    return f"{result.run}: {result.outcome}" + (f" ({why})" if why else "")
