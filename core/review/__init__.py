"""A draft in front of people: posted once for review, decided on the exact revision
(approve, reject, edit, unapprove), redrafted on a reviewer's note, with its facts,
approvals and feedback.

Owns review messages, decisions and approvals; never publishes.
"""
