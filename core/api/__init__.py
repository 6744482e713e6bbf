"""What people call and read: the `Galley` facade of the CLI, `/galley` and a notebook, the
desk where decisions are taken, and the read models.

Composes the stages; never holds a rule of its own.
"""
