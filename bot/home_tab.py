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
from enum import StrEnum
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.app_home import Viewer, home_view
from core.api.home import HomeModel, read_home
from core.api.services import Services
from core.http_calls import retry_after_seconds
from core.review.permissions import may_review
from core.setup.approval_stages import ApprovalStage

log = logging.getLogger(__name__)
RECENT = 30 * 60.0  # seconds: a viewer who opened Home this recently is kept current
# views.publish is Tier 4 (100+ per minute, short bursts allowed): stay well under it,
# across all viewers, with a small burst so a click's answer is not queued behind refreshes
PUBLISHES_PER_MINUTE = 50
BURST = 5
HOME_BACK_OFF_SECONDS = 30.0  # a 429 without a readable Retry-After


class Publish(StrEnum):
    """What one attempt to publish a viewer's Home came to."""

    PUBLISHED = "published"
    UNCHANGED = "unchanged"  # what they see has not changed since the last publish
    PACED = "paced"  # no turn left under the pacer (or a 429's Retry-After)
    REFUSED = "refused"  # Slack refused it or could not be reached


class HomeTab:
    def __init__(
        self,
        services: Services,
        client: WebClient,
        *,
        recent: float = RECENT,
        per_minute: int = PUBLISHES_PER_MINUTE,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.services, self.client = services, client
        self.recent, self.monotonic = recent, monotonic
        self.rate = per_minute / 60.0  # tokens per second
        self._tokens = float(BURST)
        self._refilled_at = monotonic()
        self._lock = threading.Lock()
        self._viewers: dict[str, float] = {}  # user -> when they last opened Home
        self._shown: dict[str, str] = {}  # user -> hash of what they were last shown
        self._blocked_until = 0.0  # monotonic time a 429's Retry-After ends
        self._workspace_url: str | None = None

    def opened(self, user: str) -> bool:
        """`app_home_opened`: remember the viewer and show them their Home now."""
        with self._lock:
            self._viewers[user] = self.monotonic()
        return self.publish(user)

    def publish(self, user: str, notice: str | None = None) -> bool:
        """Publish `user`'s Home now (after a click, or when opened); True if Slack took it."""
        outcome = self._publish(user, read_home(self.services), notice, wait=True)
        return outcome == Publish.PUBLISHED

    def refresh_recent(self) -> int:
        """Re-publish for recent viewers whose view changed; returns how many were published."""
        now = self.monotonic()
        with self._lock:
            self._viewers = {u: t for u, t in self._viewers.items() if now - t < self.recent}
            viewers = list(self._viewers)
        if not viewers:
            return 0
        model = read_home(self.services)  # one read for every viewer
        published = 0
        for user in viewers:
            outcome = self._publish(user, model, None, wait=False)
            if outcome == Publish.PACED:
                break  # the rest wait for the next pass
            published += outcome == Publish.PUBLISHED
        return published

    def _stages(self) -> list[ApprovalStage]:
        """Every recipe's approval stages: a person one names reviews as an approver."""
        recipes = self.services.config.recipes.values()
        return [stage for recipe in recipes for stage in recipe.approval_stages]

    def _publish(self, user: str, model: HomeModel, notice: str | None, *, wait: bool) -> Publish:
        slack = self.services.config.slack
        directory = self.services.directory
        recipes = self.services.config.recipes.values()
        viewer = Viewer(
            user,
            approver=may_review(slack, directory, user, self._stages()),
            admin=self.services.may_administer(user),
            recipes=frozenset(
                r.name for r in recipes if may_review(slack, directory, user, r.approval_stages)
            ),
        )
        view = home_view(
            model,
            viewer,
            now=self.services.clock.now(),
            workspace_url=self._workspace(),
            notice=notice,
        )
        shown = _fingerprint(view)
        if notice is None and not wait and self._shown.get(user) == shown:
            return Publish.UNCHANGED
        if not self._take_turn(wait):
            return Publish.PACED
        try:
            self.client.views_publish(user_id=user, view=view)
        except SlackApiError as exc:
            log.warning("views.publish for %s refused: %s", user, exc.response.get("error"))
            return Publish.PACED if self._back_off(exc) else Publish.REFUSED
        except OSError as exc:
            log.warning("views.publish for %s failed: %s", user, exc)
            return Publish.REFUSED
        with self._lock:
            self._shown[user] = shown
        return Publish.PUBLISHED

    def _take_turn(self, wait: bool) -> bool:
        """The pacer, a token bucket: BURST at once, then `rate` a second across viewers."""
        with self._lock:
            now = self.monotonic()
            elapsed, self._refilled_at = now - self._refilled_at, now
            self._tokens = min(float(BURST), self._tokens + elapsed * self.rate)
            delay = max((1 - self._tokens) / self.rate, self._blocked_until - now, 0.0)
            if delay > 0 and not wait:
                return False
            self._tokens -= 1  # may go below zero: the next ones wait for it
        if delay > 0:
            time.sleep(min(delay, 3.0))  # a person clicked: answer within a few seconds
        return True

    def _back_off(self, exc: SlackApiError) -> bool:
        """Honour a 429's Retry-After; True if it was one."""
        if exc.response.get("error") != "ratelimited":
            return False
        said = retry_after_seconds(exc.response.headers.get("Retry-After"))
        retry_after = HOME_BACK_OFF_SECONDS if said is None else said
        with self._lock:
            self._blocked_until = max(self._blocked_until, self.monotonic() + retry_after)
        return True

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
