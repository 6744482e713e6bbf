"""What people call and read: the `Galley` facade of the CLI, `/galley` and a notebook, the
desk where decisions are taken, and the read models.

Composes the stages, and routes a request to the one that decides it (`services.py`
sends a retry to drafting or to the resolver, by the run's state); the rules themselves
live in the stages, never here.
"""
