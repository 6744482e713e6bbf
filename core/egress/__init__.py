"""The one guarded way out (docs/design.md §19): every URL Galley fetches for a source, an
item's image or a link card goes through `core.egress.client`, which checks where it goes
and bounds what it reads."""
