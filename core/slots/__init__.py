"""Time arithmetic of a slot: which wall times a cron names, when a slot is drafted and
when it is published, and a recipe's prompt filled in for one slot.

Pure functions of the clock; never reads the database.
"""
