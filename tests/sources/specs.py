"""Building source specs and read contexts in tests, as the config parser would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from core.egress.addresses import parse_allow
from core.egress.way_out import Egress
from core.sources.items import ReadContext, Window
from core.sources.specs import SourceSpec

SLOT = datetime(2026, 3, 9, 9, 0, tzinfo=UTC)  # a Monday's slot; never today's date
WEEK = Window.lasting(timedelta(days=7), SLOT)

_SPEC = TypeAdapter[SourceSpec](SourceSpec)


def source(**keys: Any) -> SourceSpec:
    """A `sources` entry as the config would give it."""
    return _SPEC.validate_python(keys)


LOCAL_FAKES = parse_allow(["127.0.0.1"])[0]
"""`[egress] allow = ["127.0.0.1"]`: the local fakes a test's found URLs name. Never
127.0.0.2, where tests put the inside servers a found URL must not reach."""


def context(config_dir: Path | None = None, **overrides: Any) -> ReadContext:
    return ReadContext(
        config_dir=config_dir or Path("/nonexistent"),
        timeout=overrides.pop("timeout", 5.0),
        egress=overrides.pop("egress", Egress(LOCAL_FAKES)),
        **overrides,
    )
