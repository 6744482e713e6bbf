"""Every error Galley raises on purpose has one root, `GalleyError`.

Callers catch the specific subclass they can act on; the CLI and the Slack adapter
catch `GalleyError` to show a clean message instead of a stack trace.
"""

from __future__ import annotations

from core.drafting_policies import AttemptOutcome
from core.policies import FetchStop, ImageProblem


class GalleyError(Exception):
    """Root of every error Galley raises deliberately."""


class ConfigError(GalleyError):
    """The config file or environment is invalid; `problems` holds one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class UnknownRecipe(GalleyError):
    """A command named a recipe that is not in the config file."""


class UnknownRun(GalleyError):
    """A command named a run id that is not in the database."""


class BadDecisionQuery(GalleyError):
    """`galley decisions`: a `--since` that is not a date, a `--before` not in the log."""


class NotPermitted(GalleyError):
    """The person acting may not do this: not an approver, or not an admin."""


class RevisionRequired(GalleyError):
    """A decision must say which revision of the text it binds to (docs/design.md §10)."""


class IllegalTransition(GalleyError):
    """A state change the state machine does not allow."""


class ConcurrentChange(GalleyError):
    """A guarded write matched no row: another transaction moved it (or took over its
    lease) after this one read it. Nothing was written; the caller's transaction rolls
    back."""


class LeaseLost(ConcurrentChange):
    """Our receipt or claim is no longer ours (taken over, or settled by a person), so
    nothing may be sent or written under it."""


class KeyPayloadConflict(GalleyError):
    """The same idempotency key arrived with a different payload: nothing is changed."""


class EffectInProgress(GalleyError):
    """Another worker holds a live in-flight receipt for this effect key."""


class LostClaim(GalleyError):
    """Our lease on a claim expired and another worker took it over."""


class DatabaseNotReady(GalleyError):
    """The database schema is missing or behind; run `galley db upgrade`."""


class DatabaseNewer(DatabaseNotReady):
    """The database is at a revision this Galley does not know: a later Galley migrated
    it. Nothing is changed; upgrade Galley."""


class DatabaseUnavailable(GalleyError):
    """GALLEY_DATABASE_URL is malformed, of an unsupported kind, or cannot be reached."""


class SlackUnavailable(GalleyError):
    """Slack cannot be reached, refuses the bot token, or the API URL is wrong."""


class ModelUnavailable(GalleyError):
    """The Anthropic API cannot be reached, or refuses ANTHROPIC_API_KEY (`check --online`)."""


class PortUnavailable(GalleyError):
    """GALLEY_HTTP_PORT cannot be bound (taken, or not ours to take)."""


class ModelCallFailed(GalleyError):
    """One model call failed; `outcome` says whether and how to retry it. The adapter
    sets `latency_s` (sent to failed; None when it did not time it) and `before_send_s`."""

    latency_s: float | None = None
    before_send_s: float = 0.0
    # tokens an answer was paid for although it could not be used (a malformed set):
    # written to the attempt row, so the daily budget counts them (docs/design.md §30)
    paid_usage: dict[str, int] | None = None

    def __init__(
        self,
        outcome: AttemptOutcome,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.status = status
        self.retry_after = retry_after
        self.request_id = request_id


class SlotError(GalleyError):
    """A slot a person asked for does not exist in the recipe's schedule."""


class EffectNotSent(GalleyError):
    """An external call certainly did not take effect. `permanent`: the destination
    refused the request itself (400, 422…), so repeating it cannot help; `auth`: it
    refused Galley's credentials (401, 403), so people must be told; `retry_after`:
    seconds the destination asked us to wait before trying again."""

    def __init__(
        self,
        message: str,
        *,
        permanent: bool = False,
        auth: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.permanent = permanent or auth
        self.auth = auth
        self.retry_after = retry_after


class MessageGone(EffectNotSent):
    """The message to rewrite no longer exists (deleted in the channel): no rewrite of
    it can ever succeed, so it is not tried again."""

    def __init__(self, message: str) -> None:
        super().__init__(message, permanent=True)


class EffectOutcomeUnknown(GalleyError):
    """An external call may or may not have taken effect: reconcile before retrying."""


class LookupUnavailable(GalleyError):
    """The destination could not say whether an effect exists."""


class MissingSecret(EffectNotSent):
    """A destination's credential variable is not set: nothing was sent, and people must set
    it (permanent, and alerted like a refused credential)."""

    def __init__(self, variable: str, target: str) -> None:
        super().__init__(
            f"{variable} is not set: {target} needs it to publish", permanent=True, auth=True
        )
        self.variable = variable


class MissingExtra(EffectNotSent):
    """A destination's client library is not installed: the bot's install was incomplete
    (`galley check` and `galley run` refuse such a config before anything runs)."""

    def __init__(self, client: str, target: str) -> None:
        super().__init__(
            f"{target} needs the {client} client, which is not installed: install the bot's "
            "pinned requirements (uv pip install -r requirements.lock)",
            permanent=True,
        )
        self.client = client


class ReadRefused(GalleyError):
    """A platform refused a read for now (429, 503): nothing is known of the posts asked
    about, and the next read waits `retry_after` seconds when the platform said so."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ImageRefused(GalleyError):
    """An image cannot go where it was meant to (docs/design.md §32): `problem` says
    which rule it breaks, the message says why in words for people."""

    def __init__(self, problem: ImageProblem, message: str) -> None:
        super().__init__(message)
        self.problem = problem


class NotFetched(GalleyError):
    """A URL Galley was about to read was refused, or its read hit a bound
    (docs/design.md §33): the message is one line naming the reason or the bound ("not
    fetched: the address is private"); `retryable` is true only where a later read may
    pass (a read cut at its deadline); `stop` which rule stopped it, where one did."""

    def __init__(self, why: str, *, retryable: bool = False, stop: FetchStop | None = None) -> None:
        super().__init__(f"not fetched: {why}")
        self.why = why
        self.retryable = retryable
        self.stop = stop
