"""What the Discord fake makes of a message (tests/fakes/discord.py): its attachments as
Discord checks them, whom it would notify after `allowed_mentions`, and how a read shows
it (reactions in Discord's shape)."""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.social import Reply

MAX_FILES = 10
MAX_FILE_BYTES = 10 * 1024 * 1024  # a bot's upload limit in a server without boosts
MAX_DESCRIPTION = 1024
EVERYONE = re.compile(r"@(everyone|here)\b")
USER = re.compile(r"<@!?(\d+)>")
ROLE = re.compile(r"<@&(\d+)>")


def error(code: int, message: str, errors: dict[str, Any] | None = None) -> dict[str, Any]:
    """Discord's JSON error body: `code` (its JSON error code), `message`, maybe `errors`."""
    body: dict[str, Any] = {"message": message, "code": code}
    if errors is not None:
        body["errors"] = errors
    return body


def form_error(field: str, code: str, message: str) -> dict[str, Any]:
    """`400 Invalid Form Body`: the field's `_errors` nested under `errors`."""
    return error(
        50035, "Invalid Form Body", {field: {"_errors": [{"code": code, "message": message}]}}
    )


def attachments_of(
    listed: list[dict[str, Any]], files: list[dict[str, Any]]
) -> list[dict[str, Any]] | Reply:
    """The message's attachments, as Discord checks them: each `attachments[n]` names an
    uploaded `files[n]`; at most 10; a file over the upload limit is 413 (40005); a
    description over 1,024 characters a form error."""
    if len(files) > MAX_FILES:
        return (
            400,
            form_error("files", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length."),
            {},
        )
    shown = []
    for n, file in enumerate(files):
        if file["size"] > MAX_FILE_BYTES:
            return 413, error(40005, "Request entity too large"), {}
        entry = next((a for a in listed if int(a.get("id", -1)) == n), {})
        description = str(entry.get("description") or "")
        if len(description) > MAX_DESCRIPTION:
            message = f"Must be {MAX_DESCRIPTION} or fewer in length."
            return 400, form_error("attachments", "BASE_TYPE_MAX_LENGTH", message), {}
        shown.append(
            {
                "filename": str(entry.get("filename") or file["filename"]),
                "description": description or None,
                "content_type": file["type"],
                "size": file["size"],
                "sha256": file["sha256"],  # the fake's own record of the bytes
            }
        )
    return shown


def notified(content: str, allowed: Any) -> list[str]:
    """Whom the message pings, as Discord decides it: without `allowed_mentions` every
    @everyone/@here, user and role in the content; with it, only the kinds `parse` names
    and the ids `users`/`roles` list."""
    everyone = [f"@{m}" for m in EVERYONE.findall(content)]
    users = [f"user:{u}" for u in USER.findall(content)]
    roles = [f"role:{r}" for r in ROLE.findall(content)]
    if not isinstance(allowed, dict):
        return everyone + users + roles
    parse = set(allowed.get("parse") or [])
    listed_users = {str(u) for u in allowed.get("users") or []}
    listed_roles = {str(r) for r in allowed.get("roles") or []}
    pinged = everyone if "everyone" in parse else []
    pinged += [u for u in users if "users" in parse or u.removeprefix("user:") in listed_users]
    pinged += [r for r in roles if "roles" in parse or r.removeprefix("role:") in listed_roles]
    return pinged


def public(post: dict[str, Any], *, with_nonce: bool) -> dict[str, Any]:
    hidden = {"owner", "visible", "at", "counts", "notified", "nonce"}
    shown = {k: v for k, v in post.items() if k not in hidden}
    if with_nonce and post.get("nonce") is not None:
        shown["nonce"] = post["nonce"]
    counts = post.get("counts") or {}
    if counts:
        shown["reactions"] = [
            {
                "count": n,
                "count_details": {"burst": 0, "normal": n},
                "me": False,
                "me_burst": False,
                "burst_colors": [],
                "emoji": {"id": None, "name": name},
            }
            for name, n in counts.items()
        ]
    return shown
