"""`galley check --online` (docs/design.md §24): each publish target's credentials proved
against its own service without posting anything (Bluesky signs in, Mastodon verifies
the token, LinkedIn reads one post of the author), one line per target. It never
publishes and never writes to the database.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.ports import Publisher
from core.setup.config import Config, Recipe


@dataclass(frozen=True)
class CredentialProof:
    """One target's answer: whether its service accepted Galley's credentials."""

    target: str
    ok: bool
    said: str

    def __str__(self) -> str:
        return f"{self.target}: {'ok' if self.ok else 'FAILED'}: {self.said}"


def prove_targets(
    config: Config, publishers_for: Callable[[Recipe], Sequence[Publisher]]
) -> list[CredentialProof]:
    """Every target of every recipe, once each (two recipes may share an account). A
    destination with nothing to prove (a webhook; Slack, proved by `auth.test`) is left
    out."""
    proofs: list[CredentialProof] = []
    seen: set[str] = set()
    for recipe in config.recipes.values():
        for publisher in publishers_for(recipe):
            if publisher.target in seen:
                continue
            seen.add(publisher.target)
            proof = prove_publisher(publisher)
            if proof is not None:
                proofs.append(proof)
    return proofs


def can_prove(publisher: Publisher) -> bool:
    """Whether a destination has credentials to prove (a webhook, Slack: not here)."""
    return callable(getattr(publisher, "prove_credentials", None))


def prove_publisher(publisher: Publisher) -> CredentialProof | None:
    """One target's credentials proved; None for a destination with nothing to prove."""
    prove = getattr(publisher, "prove_credentials", None)
    return None if prove is None else _proved(publisher.target, prove)


def _proved(target: str, prove: Callable[[], str]) -> CredentialProof:
    try:
        return CredentialProof(target, True, prove())
    except Exception as exc:  # whatever the service or its client says is the line
        return CredentialProof(target, False, str(exc) or type(exc).__name__)
