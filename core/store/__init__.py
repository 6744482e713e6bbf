"""The database: engine and short transactions, row look-ups in lock order, every state
change as a guarded write, leases, and receipts for external effects.

Owns the tables' writes and the migrations; never calls a model, Slack or a platform.
"""
