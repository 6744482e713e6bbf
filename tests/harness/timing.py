"""One scale for every deadline a test waits on, so a loaded CI box or a slow laptop
raises them all at once: `GALLEY_TEST_SLOWNESS=3 pytest` triples each wait's limit.

Tests wait on events (a row, a request the fake received); these limits only say when
to give up. Assertions are about order and counts, never about wall time, so a larger
scale cannot make a test pass that should fail: it only gives a slow machine room.
"""

from __future__ import annotations

import os

SLOWNESS = max(1.0, float(os.environ.get("GALLEY_TEST_SLOWNESS", "1") or "1"))


def scaled(seconds: float) -> float:
    """`seconds` of patience on an idle machine, scaled for this one."""
    return seconds * SLOWNESS
