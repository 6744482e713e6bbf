"""What a `learn_from = "top"` run was shown beside its sources (docs/design.md §27),
as kept with its snapshot: plain data, written and read as JSON. Reading it from the
history is core/drafting/learning.py's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Example:
    """A published post that did well: its text, where and when it went out, its score."""

    text: str
    target: str
    published_at: str  # ISO 8601, UTC
    score: int


@dataclass(frozen=True)
class Ask:
    """What a reviewer asked: a rejection's reason or a redraft's note."""

    kind: str  # "rejection" or "redraft"
    text: str


@dataclass(frozen=True)
class Lessons:
    examples: tuple[Example, ...] = ()
    asks: tuple[Ask, ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {"examples": [asdict(e) for e in self.examples], "asks": [asdict(a) for a in self.asks]}
        )

    @classmethod
    def from_json(cls, stored: str) -> Lessons:
        data = json.loads(stored)
        return cls(
            examples=tuple(Example(**example) for example in data["examples"]),
            asks=tuple(Ask(**ask) for ask in data["asks"]),
        )
