"""Galley's own Prometheus metrics, all defined here so their names and labels are in
one place (served on `/metrics` by `galley run`). Label values are enum members or
recipe names, never free text, so the number of series stays bounded.

Counters count what this process saw happen. The gauges that describe the database
(queue depth, uncertain and stuck runs) are `core/operations/gauges.py`'s, read at scrape time.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

LATENCY_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 3)

STATE_CHANGES = Counter(
    "galley_state_changes_total",
    "State changes recorded in the events table, by subject and target state.",
    ["subject", "to_state"],
)
RUNS_FINISHED = Counter(
    "galley_runs_finished_total",
    "Runs that reached a final state, by recipe, state and reason.",
    ["recipe", "state", "reason"],
)
DRAFT_TRANSITIONS = Counter(
    "galley_draft_transitions_total",
    "Drafts entering a state, by recipe and state.",
    ["recipe", "state"],
)
PUBLICATIONS = Counter(
    "galley_publications_total",
    "Publish effects that reached an outcome (succeeded, failed, uncertain).",
    ["recipe", "outcome"],
)
ALERTS = Counter(
    "galley_alerts_total",
    "Alert messages about a run, by outcome of the post.",
    ["outcome"],
)
CLAIM_TAKEOVERS = Counter(
    "galley_claim_takeovers_total",
    "Expired claims taken over by another worker, by recipe.",
    ["recipe"],
)
MODEL_CALLS = Counter(
    "galley_model_calls_total",
    "Model calls, by recipe, model and outcome (ok, not_sent, rejected_retryable, ...).",
    ["recipe", "model", "outcome"],
)
MODEL_LATENCY = Histogram(
    "galley_model_call_duration_seconds",
    "Wall time of one model call, whatever its outcome.",
    ["outcome"],
    buckets=LATENCY_BUCKETS,
)
MODEL_TOKENS = Counter(
    "galley_model_tokens_total",
    "Tokens billed, by recipe and kind (input, output, cache_creation, cache_read).",
    ["recipe", "kind"],
)
MODEL_COST = Counter(
    "galley_model_cost_usd_total",
    "Estimated model cost in US dollars, by recipe (list prices, see core/telemetry/observe.py).",
    ["recipe"],
)
BATCH_ENTRIES = Counter(
    "galley_batch_entries_total",
    "Entries of ended Message Batches, by recipe and result (succeeded, errored, canceled, "
    "expired, missing); their tokens and cost count in galley_model_*_total at batch prices.",
    ["recipe", "result"],
)
BATCH_WAIT = Histogram(
    "galley_batch_wait_seconds",
    "Time a draft waited in a Message Batch: from its entry to its batch's end.",
    buckets=(30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 21600, 86400),
)
SLACK_CALLS = Counter(
    "galley_slack_calls_total",
    "Slack Web API calls, by method and outcome (ok, rate_limited, refused, "
    "unreachable, no_answer).",
    ["method", "outcome"],
)
SLACK_ACK_LATENCY = Histogram(
    "galley_slack_ack_duration_seconds",
    "Time from receiving a Slack request (HTTP or Socket Mode) to acknowledging it.",
    buckets=ACK_BUCKETS,
)
SCHEDULER_FIRES = Counter(
    "galley_scheduler_fires_total",
    "Recipe jobs fired by the scheduler, by recipe.",
    ["recipe"],
)
SCHEDULER_MISFIRES = Counter(
    "galley_scheduler_misfires_total",
    "Recipe fires the scheduler found past misfire_grace, by recipe.",
    ["recipe"],
)
