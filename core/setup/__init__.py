"""The config file and the environment, parsed and validated.

Owns recipes' settings and durations; never reads the database.
"""
