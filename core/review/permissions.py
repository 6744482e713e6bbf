"""Who may do what (docs/design.md §15, `[slack]`): approvers decide drafts, admins run Galley.

Lists hold users (U…/W…) and user groups (S…). An empty approver list means anyone;
an empty admin list means the approvers.
"""

from __future__ import annotations

from core.policies import Role
from core.ports import Directory
from core.setup.config import SlackSection


def listed(user: str, ids: list[str], directory: Directory) -> bool:
    if user in ids:
        return True
    return any(user in directory.group_members(g) for g in ids if g.startswith("S"))


def may_approve(slack: SlackSection, directory: Directory, user: str) -> bool:
    return not slack.approvers or listed(user, slack.approvers, directory)


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
