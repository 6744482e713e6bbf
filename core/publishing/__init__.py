"""An approved draft published once to each target at its time, looked up before any retry;
each platform's adapter under platforms/.

Owns publication receipts; never changes a draft's text.
"""
