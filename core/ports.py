"""The ports: small interfaces the domain needs from the outside world.

Adapters live elsewhere (`core/drafting.py` for Anthropic, `bot/` for Slack). The domain
depends only on these Protocols, so a notebook or a test can supply its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, aware, in UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass(frozen=True)
class DraftRequest:
    model: str
    system: str
    prompt: str
    max_tokens: int
    timeout: timedelta


@dataclass(frozen=True)
class ModelReply:
    text: str
    model: str
    request_id: str | None
    stop_reason: str | None
    input_tokens: int
    output_tokens: int
    cache_creation_tokens: int
    cache_read_tokens: int


class Drafter(Protocol):
    def draft(self, request: DraftRequest) -> ModelReply:
        """One model call, no retries; raises `ModelCallFailed` with its outcome."""
        ...
