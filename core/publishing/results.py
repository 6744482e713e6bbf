"""What a publish pass came to for one run: the value the service, the orphan pass and
every surface read."""

from __future__ import annotations

from dataclasses import dataclass

from core.policies import PublishOutcome


@dataclass(frozen=True)
class PublishResult:
    outcome: PublishOutcome
    run_id: str
    detail: str | None = None
    external_id: str | None = None
