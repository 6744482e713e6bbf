"""A recipe's approval stages (docs/design.md §22) and the lines refusing stages that
could never be passed: more approvals than the people named. A stage's approvers need
not be in `[slack] approvers` (`core/review/permissions.py` lets them approve there).
Imports nothing of the config module, so it has no cycle through here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field


class ApprovalStage(BaseModel):
    """One stage of a recipe's approval (docs/design.md §22): who may approve at it
    (users and user groups) and how many distinct people it needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    approvers: list[str] = []  # empty: `[slack] approvers`; else these, listed there or not
    required: int = Field(default=1, ge=1)


class ApprovingRecipe(Protocol):
    """What the checks read of a recipe; `core.setup.config.Recipe` satisfies it."""

    @property
    def name(self) -> str: ...
    @property
    def approvals_required(self) -> int: ...
    @property
    def approval_stages(self) -> list[ApprovalStage]: ...
    @property
    def model_fields_set(self) -> set[str]: ...


# Two ways to say how a recipe is approved: a recipe giving one drops a default's other.
APPROVAL_KEYS = ("approval_stages", "approvals_required")


def defaults_for(defaults: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The `[defaults]` a recipe table takes: a recipe's own key overrides a default, and
    its `approval_stages` overrides the defaults' `approvals_required` (and the other way
    round). Both given in one table is still refused (`_stage_problems`)."""
    given = [key for key in APPROVAL_KEYS if key in recipe]
    if not given:
        return defaults
    return {k: v for k, v in defaults.items() if k not in APPROVAL_KEYS or k in given}


def approval_problems(listed: list[str] | None, recipes: Iterable[ApprovingRecipe]) -> list[str]:
    """Every approval problem of the recipes; `listed` is `[slack] approvers`, None when
    `[slack]` itself was refused (its approvers are then judged against nothing)."""
    recipes = list(recipes)
    problems = [] if listed is None else _too_few_approvers(listed, recipes)
    problems += [problem for r in recipes for problem in _stage_problems(r)]
    return problems


def _too_few_approvers(listed: list[str], recipes: list[ApprovingRecipe]) -> list[str]:
    """A recipe needing more approvers than `[slack] approvers` names could never be
    approved. A user group (S…) may hold any number of people, so it is not counted."""
    if not listed or any(person.startswith("S") for person in listed):
        return []
    return [
        f"recipe {r.name!r}: approvals_required: {r.approvals_required} approvals needed but "
        f"[slack] approvers names only {len(set(listed))}"
        for r in recipes
        if r.approvals_required > len(set(listed))
    ]


def _stage_problems(recipe: ApprovingRecipe) -> list[str]:
    """`approval_stages` replaces the one-stage `approvals_required`; its names are
    unique, and a stage naming users only needs no more approvals than it names (a stage
    naming nobody asks `[slack] approvers`, judged by `_too_few_approvers`' rule)."""
    stages, where = recipe.approval_stages, f"recipe {recipe.name!r}: approval_stages"
    problems = []
    if stages and "approvals_required" in recipe.model_fields_set:
        problems.append(f"{where}: give either approval_stages or approvals_required, not both")
    names = [stage.name for stage in stages]
    twice = sorted({name for name in names if names.count(name) > 1})
    problems += [f"{where}: stage {name!r} named twice" for name in twice]
    problems += [
        f"{where}: stage {s.name!r} needs {s.required} approvals but names only "
        f"{len(set(s.approvers))}"
        for s in stages
        if _names_users_only(s.approvers) and s.required > len(set(s.approvers))
    ]
    return problems


def _names_users_only(people: list[str]) -> bool:
    """A list that can be counted: someone named, and no user group (S…) among them."""
    return bool(people) and not any(person.startswith("S") for person in people)
