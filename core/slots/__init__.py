"""Time arithmetic of a slot: which wall times a cron names, when a slot is drafted and
when it is published.

Pure functions of the clock; never reads the database.
"""
