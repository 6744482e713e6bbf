"""How long a `galley` command takes from exec to exit, against `python -c pass`.

    .venv/bin/python -m bench.cli_startup [--runs 15]

Runs `galley --help`, `galley status` and `galley check` on an empty SQLite database
(created and migrated before timing) with a copy of `examples/galley.toml`, each
`--runs` times after one untimed warm-up, and prints min, median and max wall time and
the median's ratio to `python -c pass`. Compiled bytecode goes to a temporary
PYTHONPYCACHEPREFIX, filled by the warm-up, so a figure is the import and run cost,
not compiling (as in the Docker image, which compiles at build time). Goal:
`--help` and `status` under 0.5 s on a machine where the floor below takes
`REFERENCE_FLOOR_S`; held as a ratio to the floor taken in the same run, because this
machine's speed varies two- to fourfold from day to day. The floor is `python -c pass`,
as first measured (`status` was 0.757 s, 50 floors; a quiet day's floor is 0.0151 s,
so 0.5 s is 33 floors). Exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GALLEY = Path(sys.prefix) / "bin" / "galley"
GOAL_SECONDS = 0.5
REFERENCE_FLOOR_S = 0.0151  # issue 35's run: status 0.757 s was 50 x python -c pass
HELD = ("galley --help", "galley status")
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],  # the floor
    "galley --help": [str(GALLEY), "--help"],
    "galley status": [str(GALLEY), "status"],
    "galley check": [str(GALLEY), "check"],
}


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="galley-cli-bench-") as tmp:
        work = Path(tmp)
        shutil.copy(REPO / "examples" / "galley.toml", work / "galley.toml")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {
            "PYTHONPYCACHEPREFIX": str(work / "pycache"),
            "GALLEY_CONFIG": str(work / "galley.toml"),
            "GALLEY_DATABASE_URL": f"sqlite:///{work / 'galley.db'}",
            "ANTHROPIC_API_KEY": "bench-key",
        }
        subprocess.run([str(GALLEY), "db", "upgrade"], env=env, cwd=work, check=True)
        goal = GOAL_SECONDS / REFERENCE_FLOOR_S
        head = f"{'command':<16} {'min s':>7} {'median s':>9} {'max s':>7} {'x floor':>8}"
        print(f"{head} {'goal x':>7}  goal")
        floor = None
        missed = []
        for name, argv in COMMANDS.items():
            timed(argv, env, work)  # warm-up: fills the bytecode cache
            times = [timed(argv, env, work) for _ in range(args.runs)]
            median = statistics.median(times)
            floor = floor or median
            ratio = median / floor
            verdict = ("PASS" if ratio <= goal else "MISS") if name in HELD else "-"
            held = f"{goal:.1f}" if name in HELD else "-"
            print(
                f"{name:<16} {min(times):>7.3f} {median:>9.3f} {max(times):>7.3f} "
                f"{ratio:>8.2f} {held:>7}  {verdict}"
            )
            if verdict == "MISS":
                missed.append(name)
    load = os.getloadavg()[0]
    python = sys.version.split()[0]
    print(f"{args.runs} runs each; 1-minute load average {load:.2f}; Python {python}")
    print(f"goal: {GOAL_SECONDS} s where the floor is {REFERENCE_FLOOR_S} s, so {goal:.1f} floors")
    for name in missed:
        print(f"GOAL MISSED: {name} median is more than {goal:.1f} x the floor")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
