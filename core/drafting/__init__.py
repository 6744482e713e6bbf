"""Claim before you spend, then one model call per slot (the Message Batches adapter
stands beside it, not yet wired in), its text measured against each target's limit, and
the draft stored once.

Owns claims, attempts and every revision of a draft's text; never posts for review or
publishes.
"""
