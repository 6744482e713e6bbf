"""The one guarded way out (docs/design.md §33): every URL Galley fetches for a source, an
item's image or a link card goes through `core.egress.client`, which checks where it goes
and bounds what it reads. It never trusts a found URL or a redirect, and never reads
more, or longer, than its bounds."""
