"""What Galley tells as things happen: a log line and counters per state change, model call
and Slack call, and their estimated cost.

Owns the Prometheus counters; never decides anything.
"""
