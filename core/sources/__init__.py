"""Sources: what happened, read once per run and kept with it (docs/design.md §27).

`specs` holds the config keys of each kind, `items` the values every reader returns and
every later step reads (an item, a window, a read's failure). A reader never stores,
drafts or decides whether an item is new: the run's snapshot does.
"""
