"""The alert buttons' listeners (Mark published, Retry, Cancel, Skip), which `Listeners`
(bot/handlers.py) inherits: an admin only, the run settled through core's resolver, its
publication taken up again, and the alert rewritten to say how it was settled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, Respond

from bot.alert_blocks import alert_run_id, resolved_blocks
from bot.commands import CommandContext, retry_run
from bot.replies import in_thread
from bot.work import Work
from core.api.services import Services
from core.errors import GalleyError
from core.policies import Finding
from core.ports import MessageRef

log = logging.getLogger(__name__)


class AlertListeners:
    """The listeners of an alert's buttons, over the same container and work as the rest."""

    core: Services
    work: Work

    def on_alert_published(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        self._settle_alert(ack, body, respond, self._mark_published)

    def on_alert_retry(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        self._settle_alert(ack, body, respond, self._retry)

    def on_alert_cancel(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        self._settle_alert(ack, body, respond, self._cancel)

    def on_alert_skip(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        self._settle_alert(ack, body, respond, self._skip)

    def _mark_published(self, run: str, user: str, respond: Respond) -> str:
        return self.core.resolver.resolve(run, Finding.PUBLISHED, actor=user)

    def _retry(self, run: str, user: str, respond: Respond) -> str:
        context = CommandContext(self.core, user, self.work, in_thread(respond))
        return retry_run(run, context)

    def _cancel(self, run: str, user: str, respond: Respond) -> str:
        return self.core.resolver.cancel(run, actor=user)

    def _skip(self, run: str, user: str, respond: Respond) -> str:
        return self.core.resolver.skip(run, actor=user)

    def _settle_alert(
        self,
        ack: Ack,
        body: dict[str, Any],
        respond: Respond,
        resolve: Callable[[str, str, Respond], str],
    ) -> None:
        ack()
        user = body["user"]["id"]
        if not self.core.may_administer(user):
            in_thread(respond)("Only Galley's admins may settle runs.")
            return
        run_id = alert_run_id(body["actions"][0]["value"])
        outcome = resolve(run_id, user, respond)
        self.work.publish_soon(run_id)
        message = body["message"]
        alert = MessageRef(body["container"]["channel_id"], message["ts"])
        blocks = resolved_blocks(message.get("blocks", []), outcome, by=user)
        try:
            self.work.services.channels.update(alert, text=message.get("text", ""), blocks=blocks)
        except GalleyError as exc:  # the alert pass rewrites it once the run moves on
            log.warning("alert %s not rewritten after %s: %s", alert.ts, outcome, exc)
