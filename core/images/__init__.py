"""A post's images: bytes kept once by hash, shaped to each platform's limits, checked
at review, uploaded once per target (docs/design.md §32).

Owns the `images` table and upload receipts; never changes a draft's text.
"""
