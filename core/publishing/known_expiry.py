"""Dates known ahead that will make a publication fail (docs/design.md §36): a LinkedIn
token's expiry and the retirement of the `LinkedIn-Version` a target sends.

A LinkedIn access token lasts 60 days. Its expiry is read from `<secret_env>_EXPIRES`
(`GALLEY_LINKEDIN_TOKEN_EXPIRES` by default: an ISO date, or date and time), set when
the token is minted, when LinkedIn answers with its `expires_in`. Not from LinkedIn's
token introspection: that endpoint takes the app's client id and client secret, which
Galley does not hold (it holds only the access token), and holding them just to read a
date would widen what a leak of Galley's environment gives away.

LinkedIn retires a version one year after its release: version YYYYMM retires at the
start of YYYYMM + 12 months. Within two months of that, `galley check` and the digest
warn.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

from core.setup.config import Config
from core.setup.publish_targets import LinkedInTarget

EXPIRES_SUFFIX = "_EXPIRES"
TOKEN_WARN_DAYS = 7  # a known expiry is alerted this many days ahead
VERSION_LIFE_MONTHS = 12
VERSION_WARN_MONTHS = 2


@dataclass(frozen=True)
class KnownExpiry:
    """A target's token expiry as its variable says it (`expires` None: unreadable)."""

    target: str
    variable: str  # where the date is read from
    expires: date | None
    secret_env: str  # the variable to set with a new token

    def days_left(self, today: date) -> int | None:
        return None if self.expires is None else (self.expires - today).days

    def text(self, today: date) -> str:
        if self.expires is None:
            return f"{self.target}: {self.variable} is not a date (YYYY-MM-DD)"
        left = (self.expires - today).days
        when = f"in {left} day(s)" if left >= 0 else f"{-left} day(s) ago"
        return f"{self.target}: token expires {self.expires.isoformat()} ({when})"

    def due(self, today: date) -> bool:
        """Within TOKEN_WARN_DAYS of expiring, or expired."""
        left = self.days_left(today)
        return left is not None and left <= TOKEN_WARN_DAYS


def linkedin_targets(config: Config) -> list[LinkedInTarget]:
    found: dict[str, LinkedInTarget] = {}
    for recipe in config.recipes.values():
        for spec in recipe.targets:
            if isinstance(spec, LinkedInTarget):
                found.setdefault(spec.target, spec)
    return [found[t] for t in sorted(found)]


def known_expiries(config: Config, environ: Mapping[str, str] | None = None) -> list[KnownExpiry]:
    """Each LinkedIn target whose expiry variable is set."""
    env = os.environ if environ is None else environ
    found = []
    for spec in linkedin_targets(config):
        variable = spec.secret_env + EXPIRES_SUFFIX
        raw = env.get(variable, "").strip()
        if raw:
            found.append(KnownExpiry(spec.target, variable, _date(raw), spec.secret_env))
    return found


def version_retires(version: str) -> date:
    """`202511` (or `202511.01`) retires on 2026-11-01."""
    year, month = int(version[:4]), int(version[4:6])
    return date(year + VERSION_LIFE_MONTHS // 12, month, 1)


def version_warnings(config: Config, today: date) -> list[str]:
    """A line per LinkedIn target whose `LinkedIn-Version` retires within two months."""
    lines = []
    for spec in linkedin_targets(config):
        retires = version_retires(spec.version)
        months_left = (retires.year - today.year) * 12 + retires.month - today.month
        if months_left > VERSION_WARN_MONTHS:
            continue
        when = "retired" if today >= retires else "retires"
        lines.append(
            f"{spec.target}: LinkedIn-Version {spec.version} {when} {retires:%Y-%m-%d} (LinkedIn "
            "retires a version a year after its release): set `version` in its publish table "
            "to a newer YYYYMM."
        )
    return lines


def expiry_warnings(
    config: Config, today: date, environ: Mapping[str, str] | None = None
) -> list[str]:
    """A line per known token expiry due within TOKEN_WARN_DAYS, or unreadable."""
    return [
        f"{e.text(today)}: mint a new token and set {e.secret_env} and {e.variable}"
        for e in known_expiries(config, environ)
        if e.expires is None or e.due(today)
    ]


def _date(raw: str) -> date | None:
    try:
        return date.fromisoformat(raw)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(raw).date()
    except ValueError:
        return None
