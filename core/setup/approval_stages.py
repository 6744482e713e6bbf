"""A recipe's approval stages (docs/design.md §22) and the lines refusing stages that
could never be passed: more approvals than the people named, or an approver whom
`[slack] approvers` would refuse first. Imports nothing of the config module, so it
has no cycle through here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field


class ApprovalStage(BaseModel):
    """One stage of a recipe's approval (docs/design.md §22): who may approve at it
    (users and user groups) and how many distinct people it needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    approvers: list[str] = []  # empty: anyone allowed by `[slack] approvers`
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


def approval_problems(listed: list[str] | None, recipes: Iterable[ApprovingRecipe]) -> list[str]:
    """Every approval problem of the recipes; `listed` is `[slack] approvers`, None when
    `[slack]` itself was refused (its approvers are then judged against nothing)."""
    recipes = list(recipes)
    problems = [] if listed is None else _too_few_approvers(listed, recipes)
    problems += [problem for r in recipes for problem in _stage_problems(r)]
    if listed is not None:
        problems += _stage_approvers_not_allowed(listed, recipes)
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
    unique, and a stage naming users only needs no more approvals than it names."""
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
        if not any(p.startswith("S") for p in s.approvers) and s.required > len(set(s.approvers))
    ]
    return problems


def _stage_approvers_not_allowed(listed: list[str], recipes: list[ApprovingRecipe]) -> list[str]:
    """A stage's approver must also be allowed by `[slack] approvers`, or their clicks are
    refused before any stage is looked at. Only judged when that list names users only."""
    if not listed or any(person.startswith("S") for person in listed):
        return []
    return [
        f"recipe {r.name!r}: approval_stages: stage {stage.name!r} names {who}, who is not in "
        "[slack] approvers"
        for r in recipes
        for stage in r.approval_stages
        for who in stage.approvers
        if who not in listed
    ]
