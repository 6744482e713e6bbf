"""One adapter per platform behind the Publisher port (webhook, Bluesky, Mastodon,
LinkedIn) and how each counts and cleans a post's text.

Speaks one service each; never touches the database.
"""
