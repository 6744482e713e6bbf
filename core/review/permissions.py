"""Who may do what (docs/design.md §15, `[slack]`, and docs/design.md §22): approvers
decide drafts, admins run Galley, and a recipe's approval stage asks its own approvers.
The one rule the click check, the review message's "asking" and the reminders all read.

Lists hold users (U…/W…) and user groups (S…). An empty approver list means anyone;
an empty admin list means the approvers; a stage naming nobody asks `[slack] approvers`.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.policies import Role
from core.ports import Directory
from core.setup.approval_stages import ApprovalStage
from core.setup.config import SlackSection


def listed(user: str, ids: list[str], directory: Directory) -> bool:
    if user in ids:
        return True
    return any(user in directory.group_members(g) for g in ids if g.startswith("S"))


def may_approve(slack: SlackSection, directory: Directory, user: str) -> bool:
    return not slack.approvers or listed(user, slack.approvers, directory)


def asked_at(slack: SlackSection, stage: ApprovalStage) -> list[str]:
    """Who a stage asks: the approvers it names, else `[slack] approvers` (empty: anyone)."""
    return stage.approvers or slack.approvers


def may_approve_at(
    slack: SlackSection,
    directory: Directory,
    user: str,
    stage: ApprovalStage,
    stages: Iterable[ApprovalStage],
) -> bool:
    """Whether `user`'s approval counts at `stage` of a recipe with these `stages` (the
    caller checked `may_review`): named by the stage, even when not in `[slack] approvers`;
    at a stage naming nobody, anyone who may review but not someone who may review only
    because another stage names them (a later stage's approver clicking early)."""
    if stage.approvers:
        return listed(user, stage.approvers, directory)
    named_elsewhere = any(s.approvers and listed(user, s.approvers, directory) for s in stages)
    return not named_elsewhere or may_approve(slack, directory, user)


def may_review(
    slack: SlackSection, directory: Directory, user: str, stages: Iterable[ApprovalStage]
) -> bool:
    """Whether `user` may decide a draft of a recipe with these stages (approve at their
    stage, reject, edit, redraft): allowed by `[slack] approvers`, or named by a stage."""
    return may_approve(slack, directory, user) or any(
        s.approvers and listed(user, s.approvers, directory) for s in stages
    )


def may_administer(slack: SlackSection, directory: Directory, user: str) -> bool:
    if slack.admins:
        return listed(user, slack.admins, directory)
    return may_approve(slack, directory, user)


def has_role(slack: SlackSection, directory: Directory, user: str, role: Role) -> bool:
    if role == Role.APPROVER:
        return may_approve(slack, directory, user)
    return may_administer(slack, directory, user)


class ListedOnly:
    """A directory that knows no user groups: only people listed by id are recognised.
    For a notebook without a Slack token; with one, `galley.connect` asks Slack."""

    def group_members(self, group_id: str) -> frozenset[str]:
        return frozenset()
