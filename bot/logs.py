"""How `galley run` logs: plain text lines by default, or one JSON object per line
(`GALLEY_LOG_FORMAT=json`) for a log pipeline. The standard library is enough: every
library Galley hosts (Bolt, APScheduler, uvicorn) already logs through it, so one
formatter covers them all, with no second logging system to configure.

Fields a Galley log call passes as `extra={"galley": {...}}` become top-level JSON keys.
While `galley run` starts, other libraries' lines are held back: a start-up that fails
ends with Galley's one line naming what to fix, not with Bolt's or the SDK's account of
the same failure before it (`GALLEY_LOG_LEVEL=debug` shows everything).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from core.policies import LogFormat, LogLevel

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET_LOGGERS = ("alembic", "httpx2", "httpx", "apscheduler", "slack_bolt.App")
NOISE = (
    # APScheduler warns on every skipped run of an interval job that is still running;
    # for the housekeeping passes that is expected (the next pass does the work).
    "skipped: maximum number of running instances reached",
    # Bolt reads SLACK_BOT_TOKEN itself and warns that the client Galley built (with its
    # own timeout and no retry handlers) is used instead: that is the intent.
    "`token` will be unused",
    # slack_sdk logs every refused connection at ERROR; Galley reports each failed call
    # itself, classified (galley.slack lines and galley_slack_calls_total).
    "Failed to send a request to Slack API server",
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, Galley's fields."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "galley", None)
        if isinstance(fields, dict):
            document |= {k: v for k, v in fields.items() if k not in document}
        if record.exc_info:
            document["traceback"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str, ensure_ascii=False)


class NoiseFilter(logging.Filter):
    """Drops the library warnings in NOISE: expected, repeated, and not actionable."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(noise in message for noise in NOISE)


GALLEY_LOGGERS = ("galley", "core", "bot")


class StartupHold(logging.Filter):
    """Holds back records of loggers other than Galley's until `release()` (re-emitted
    in order) or `discard()` (dropped)."""

    def __init__(self, handler: logging.Handler) -> None:
        super().__init__()
        self.handler = handler
        self._held: list[logging.LogRecord] = []
        self._holding = True
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.split(".", 1)[0] in GALLEY_LOGGERS:
            return True
        with self._lock:
            if self._holding:
                self._held.append(record)
                return False
        return True

    def release(self) -> None:
        with self._lock:
            self._holding, held, self._held = False, self._held, []
        for record in held:
            self.handler.handle(record)

    def discard(self) -> None:
        with self._lock:
            self._holding, self._held = False, []


@contextmanager
def library_lines_held(debug: bool) -> Iterator[StartupHold | None]:
    """Hold other libraries' lines on the root handler while `galley run` starts: the
    caller releases them once the bot runs; a start-up that fails with a Galley error
    drops them (its own line says what to fix). With `debug`, nothing is held."""
    handlers = logging.getLogger().handlers
    if debug or not handlers:
        yield None
        return
    hold = StartupHold(handlers[0])
    handlers[0].addFilter(hold)
    try:
        yield hold
    except Exception as exc:
        from core.errors import GalleyError

        if isinstance(exc, GalleyError):
            hold.discard()
        raise
    finally:
        hold.release()  # nothing left once discarded; otherwise shown, as it came
        handlers[0].removeFilter(hold)


def configure_logging(log_format: LogFormat, level: LogLevel) -> None:
    """Root handler on stderr in the chosen format; third-party chatter kept to warnings."""
    handler = logging.StreamHandler()
    if log_format == LogFormat.JSON:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    handler.addFilter(NoiseFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if level == LogLevel.DEBUG else getattr(logging, level.upper()))
    if level != LogLevel.DEBUG:
        for noisy in QUIET_LOGGERS:
            logging.getLogger(noisy).setLevel(logging.WARNING)
