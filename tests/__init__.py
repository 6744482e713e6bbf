"""Galley's tests. Importing this package (pytest does, before the first conftest) lets
the test process keep compiled modules, as its child processes do (harness/processes.py):
where PYTHONDONTWRITEBYTECODE is set, every run, and every xdist worker, otherwise
compiles each imported module and re-rewrites each test module's asserts anew (most of
collecting's time). They go to a cache outside the checkout."""

import sys
import tempfile
from pathlib import Path

PYCACHE = Path(tempfile.gettempdir()) / "galley-test-pycache"

sys.pycache_prefix = str(PYCACHE)
sys.dont_write_bytecode = False
