"""The config's `[egress]` table (docs/design.md §33): `allow`, the networks (CIDR) or
host names a found URL may reach although they are not public. Default: none.
"""

from __future__ import annotations

from typing import Any

from core.egress.addresses import EgressAllow, parse_allow
from core.setup.config_errors import unknown_key

EXAMPLE = '"10.20.0.0/16", "feeds.intranet.example"'


def egress_section(raw: Any, problems: list[str]) -> EgressAllow:
    """`[egress]` read; one line in `problems` per key or entry that is wrong."""
    if not isinstance(raw, dict):
        problems.append("[egress]: must be a table")
        return EgressAllow()
    for key in sorted(set(raw) - {"allow"}):
        problems.append(f"[egress]: {key}: {unknown_key(key, ('allow',))}")
    entries = raw.get("allow", [])
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        problems.append(f"[egress]: allow: must be a list of networks or host names: [{EXAMPLE}]")
        return EgressAllow()
    allow, bad = parse_allow(entries)
    problems += bad
    return allow
