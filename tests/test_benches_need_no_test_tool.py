"""The benches that time Galley's own overhead run from the README's install, without
pytest (bench/README.md): each is run here, small, with `import pytest` failing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SMALL_RUNS = {
    "bench.draft_overhead": ["--drafts", "2", "--processes", "1", "--warmup", "1"],
    "bench.sources_overhead": ["--drafts", "2", "--items", "2"],
}


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(SMALL_RUNS))
def test_bench_runs_without_pytest(module: str, tmp_path: Path) -> None:
    (tmp_path / "pytest.py").write_text("raise ImportError('pytest is not installed')\n")
    env = {k: v for k, v in os.environ.items() if k != "GALLEY_TEST_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    args = [sys.executable, "-m", module, *SMALL_RUNS[module], "--backends", "sqlite"]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert "ModuleNotFoundError" not in done.stderr
    assert "ImportError" not in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
