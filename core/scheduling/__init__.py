"""What a scheduler fire, a missed slot or a bump becomes: a run to draft, a skip, a
catch-up.

Owns the runs' first states; never calls the model itself (drafting does).
"""
