"""Publishes the App Home tab (`views.publish`) for people who opened it, and keeps it
current for recent viewers: each outbox pass re-renders their view and publishes it
only where what they see changed, paced under Slack's limits.

Never decides anything: the buttons go through `/galley`'s own checks (bot/handlers.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.app_home import Viewer, home_view
from core.home import HomeModel, read_home
from core.operator import Galley
from core.permissions import may_administer, may_approve
from core.ports import Directory

log = logging.getLogger(__name__)
RECENT = 30 * 60.0  # seconds: a viewer who opened Home this recently is kept current
# views.publish is Tier 4 (100+ per minute); stay well under it, across all viewers
PUBLISHES_PER_MINUTE = 50


class HomeTab:
    def __init__(
        self,
        galley: Galley,
        client: WebClient,
        directory: Directory,
        *,
        recent: float = RECENT,
        per_minute: int = PUBLISHES_PER_MINUTE,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.galley, self.client, self.directory = galley, client, directory
        self.recent, self.monotonic = recent, monotonic
        self.spacing = 60.0 / per_minute
        self._lock = threading.Lock()
        self._viewers: dict[str, float] = {}  # user -> when they last opened Home
        self._shown: dict[str, str] = {}  # user -> hash of what they were last shown
        self._next_publish = 0.0  # monotonic time the pacer allows the next publish
        self._workspace_url: str | None = None

    def opened(self, user: str) -> bool:
        """`app_home_opened`: remember the viewer and show them their Home now."""
        with self._lock:
            self._viewers[user] = self.monotonic()
        return self.publish(user)

    def publish(self, user: str, notice: str | None = None) -> bool:
        """Publish `user`'s Home now (after a click, or when opened); True if Slack took it."""
        return self._publish(user, read_home(self.galley), notice, wait=True)

    def refresh_recent(self) -> int:
        """Re-publish for recent viewers whose view changed; returns how many were published."""
        now = self.monotonic()
        with self._lock:
            self._viewers = {u: t for u, t in self._viewers.items() if now - t < self.recent}
            viewers = list(self._viewers)
        if not viewers:
            return 0
        model = read_home(self.galley)  # one read for every viewer
        published = 0
        for user in viewers:
            if self._publish(user, model, None, wait=False):
                published += 1
            elif self.monotonic() < self._next_publish:
                break  # paced out (or told to back off): the rest wait for the next pass
        return published

    def _publish(self, user: str, model: HomeModel, notice: str | None, *, wait: bool) -> bool:
        slack = self.galley.config.slack
        viewer = Viewer(
            user,
            approver=may_approve(slack, self.directory, user),
            admin=may_administer(slack, self.directory, user),
        )
        view = home_view(
            model,
            viewer,
            now=self.galley.clock.now(),
            workspace_url=self._workspace(),
            notice=notice,
        )
        shown = _fingerprint(view)
        if notice is None and not wait and self._shown.get(user) == shown:
            return False  # nothing they see has changed
        if not self._take_turn(wait):
            return False
        try:
            self.client.views_publish(user_id=user, view=view)
        except SlackApiError as exc:
            self._back_off(exc)
            log.warning("views.publish for %s refused: %s", user, exc.response.get("error"))
            return False
        except OSError as exc:
            log.warning("views.publish for %s failed: %s", user, exc)
            return False
        with self._lock:
            self._shown[user] = shown
        return True

    def _take_turn(self, wait: bool) -> bool:
        """The pacer: one publish per `spacing` seconds across viewers."""
        with self._lock:
            now = self.monotonic()
            delay = self._next_publish - now
            if delay > 0 and not wait:
                return False
            self._next_publish = max(now, self._next_publish) + self.spacing
        if delay > 0:
            time.sleep(min(delay, 3.0))  # a person clicked: never hold them past Slack's 3 s
        return True

    def _back_off(self, exc: SlackApiError) -> None:
        if exc.response.get("error") != "ratelimited":
            return
        retry_after = float(exc.response.headers.get("Retry-After", "30"))
        with self._lock:
            self._next_publish = max(self._next_publish, self.monotonic() + retry_after)

    def _workspace(self) -> str | None:
        """The workspace URL (for links to review messages), asked of Slack once."""
        if self._workspace_url is None:
            try:
                self._workspace_url = str(self.client.auth_test().get("url") or "") or None
            except (SlackApiError, OSError):
                return None
        return self._workspace_url


def _fingerprint(view: dict[str, Any]) -> str:
    """What a viewer sees, without the "Updated …" footer (the view's last block)."""
    blocks = view["blocks"][:-1]
    return hashlib.sha256(json.dumps(blocks, sort_keys=True).encode()).hexdigest()
