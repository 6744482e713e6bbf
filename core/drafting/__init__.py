"""Claim before you spend, then one model call per slot, or one Message Batch for the
slots a `drafting = "batch"` recipe has due together; the text measured against each
target's limit, and the draft stored once.

Owns claims, attempts and every revision of a draft's text; never posts for review or
publishes.
"""
