"""What became of each target of a run's publication (docs/design.md §24), from its publish
receipts: published (with its link), not known, or not published. The one sentence the
alert says and the one line `galley show` prints, so a partial publication is never told
as "nothing was published". Reads nothing itself: callers hand it the receipts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from core.identity import part_of_publish_key, target_of_publish_key
from core.states import EffectState


class ReceiptFacts(NamedTuple):
    """What one publish receipt says, as any surface reads it."""

    key: str
    state: str
    detail: str | None
    url: str | None


@dataclass(frozen=True)
class TargetOutcome:
    """One target: every part succeeded (published), one may have (not known), or not."""

    target: str
    state: str  # succeeded, or the state of its first part that did not
    url: str | None  # its first part's public URL, when published
    detail: str | None

    @property
    def published(self) -> bool:
        return self.state == EffectState.SUCCEEDED

    @property
    def unknown(self) -> bool:
        return self.state in (EffectState.UNCERTAIN, EffectState.IN_FLIGHT)

    def said(self) -> str:
        """`mastodon:example.social: published (https://…)`, or what kept it back."""
        if self.published:
            return f"{self.target}: published" + (f" ({self.url})" if self.url else "")
        what = "not known whether published" if self.unknown else "not published"
        return f"{self.target}: {what} ({self.state}" + (
            f": {self.detail})" if self.detail else ")"
        )


def target_outcomes(receipts: Iterable[ReceiptFacts]) -> list[TargetOutcome]:
    """Each target once, in the order its receipts come (first tried first); a thread's
    parts folded into their target."""
    by_target: dict[str, list[ReceiptFacts]] = {}
    for receipt in receipts:  # dicts keep the order each target was first seen in
        by_target.setdefault(target_of_publish_key(receipt.key), []).append(receipt)
    outcomes = []
    for target, parts in by_target.items():
        parts.sort(key=lambda part: part_of_publish_key(part.key))
        held = next((p for p in parts if p.state != EffectState.SUCCEEDED), None)
        if held is None:
            outcomes.append(TargetOutcome(target, EffectState.SUCCEEDED, parts[0].url, None))
        else:
            outcomes.append(TargetOutcome(target, held.state, None, held.detail))
    return outcomes


def outcomes_sentence(outcomes: list[TargetOutcome]) -> str:
    """`Published to: mastodon:… (https://…). Not published to: bluesky:….`; "Nothing was
    published." only when no target was and none may have been."""
    published = [o for o in outcomes if o.published]
    unknown = [o.target for o in outcomes if o.unknown]
    refused = [o.target for o in outcomes if not o.published and not o.unknown]
    said = []
    if published:
        shown = [o.target + (f" ({o.url})" if o.url else "") for o in published]
        said.append(f"Published to: {', '.join(shown)}.")
    elif refused and not unknown:
        said.append("Nothing was published.")
    if unknown:
        said.append(f"Not known whether published to: {', '.join(unknown)}.")
    if refused:
        said.append(f"Not published to: {', '.join(refused)}.")
    return " ".join(said)
