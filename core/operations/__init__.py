"""Keeping Galley running and people told: stuck and uncertain runs, alerts, the daily
digest, resolutions and inbound deliveries.

Owns alerts and resolutions; never drafts.
"""
