"""The small config tests and `bench/` build services from: one weekly recipe, its
timings shortened for tests, the local fakes on 127.0.0.1 allowed by `[egress] allow`.
The running bot never reads it; it imports no test tool, so a bench needs none.
"""

from __future__ import annotations

from typing import Any

from core.setup.config import Config, parse_config

BASE_CONFIG = """
[slack]
review_channel = "C0REVIEW"

[egress]
allow = ["127.0.0.1"]  # the local fakes; inside servers listen on 127.0.0.2

[defaults]
timezone = "Europe/London"
model = "claude-test"
pending_limit = {pending_limit}
claim_lease = "{claim_lease}"
heartbeat = "{heartbeat}"
takeover_after = "{takeover_after}"
model_timeout = "{model_timeout}"
max_attempts = {max_attempts}

[[recipes]]
name = "weekly-update"
platform = "linkedin"
schedule = "0 9 * * mon"
system = "You write concise updates."
prompt = "Write the weekly update for {{slot:%d %B %Y}}."
"""


def config_text(**overrides: Any) -> str:
    """The tests' and benches' config: one weekly recipe, "0 9 * * mon" in Europe/London."""
    values = {
        "pending_limit": 3,
        "claim_lease": "10m",
        "heartbeat": "2s",
        "takeover_after": "8s",
        "model_timeout": "2m",
        "max_attempts": 4,
    } | overrides
    return BASE_CONFIG.format(**values)


def make_config(**overrides: Any) -> Config:
    return parse_config(config_text(**overrides))
