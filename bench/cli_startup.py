"""How long a `galley` command takes from exec to exit, against `python -c pass`.

    .venv/bin/python -m bench.cli_startup [--runs 15] [--history 20000] [--recipes 2]

Runs `galley --help`, `galley status`, `galley runs` and `galley check` on a SQLite
database of realistic size: `--history` runs (20,000: over a year of two hourly
recipes) of `--recipes` hourly recipes from `bench/history_seed.py`, bulk-loaded before
timing, with their config: two recipes by default, as many as `examples/galley.toml`
that issue 35 measured (`--recipes 50`, history_scale's team, costs status its 50 rows
and next slots; `--history 0`: the empty database and the example config). Each
command runs `--runs` times after one untimed warm-up, in rounds (each round runs every
command once, the floor first), so the floor and the figures share the same minutes of
a shared machine's load; it prints min, median and max wall time and the median's ratio
to `python -c pass`. Compiled bytecode goes to a temporary
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
RECIPES = 2  # as many as examples/galley.toml, which issue 35 measured; 50 is a big team
REFERENCE_FLOOR_S = 0.0151  # issue 35's run: status 0.757 s was 50 x python -c pass
HELD = ("galley --help", "galley status")
FLOOR = "python -c pass"
COMMANDS = {
    FLOOR: [sys.executable, "-c", "pass"],
    "galley --help": [str(GALLEY), "--help"],
    "galley status": [str(GALLEY), "status"],
    "galley runs": [str(GALLEY), "runs"],
    "galley check": [str(GALLEY), "check"],
}


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def prepare(work: Path, env: dict[str, str], history: int, recipes: int) -> None:
    """A migrated database holding `history` runs of `recipes` recipes (and their
    config), or an empty one with the example config."""
    subprocess.run([str(GALLEY), "db", "upgrade"], env=env, cwd=work, check=True)
    if not history:
        shutil.copy(REPO / "examples" / "galley.toml", work / "galley.toml")
        return
    from bench.history_seed import config_text, load
    from core.store.engine import Store

    (work / "galley.toml").write_text(config_text(recipes))
    store = Store(env["GALLEY_DATABASE_URL"])
    counts = load(store, history, recipes)
    store.dispose()
    print("history: " + ", ".join(f"{n:,} {table}" for table, n in counts.items()))


def rounds(env: dict[str, str], cwd: Path, runs: int) -> dict[str, list[float]]:
    """Each command's wall times: one untimed warm-up each (it fills the bytecode cache),
    then `runs` rounds of every command once."""
    for argv in COMMANDS.values():
        timed(argv, env, cwd)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, argv in COMMANDS.items():
            times[name].append(timed(argv, env, cwd))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--history", type=int, default=20_000, help="runs in the database")
    parser.add_argument("--recipes", type=int, default=RECIPES, help="recipes in the config")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="galley-cli-bench-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {
            "PYTHONPYCACHEPREFIX": str(work / "pycache"),
            "GALLEY_CONFIG": str(work / "galley.toml"),
            "GALLEY_DATABASE_URL": f"sqlite:///{work / 'galley.db'}",
            "ANTHROPIC_API_KEY": "bench-key",
        }
        prepare(work, env, args.history, args.recipes)
        times = rounds(env, work, args.runs)
    goal = GOAL_SECONDS / REFERENCE_FLOOR_S
    floor = statistics.median(times[FLOOR])
    head = f"{'command':<16} {'min s':>7} {'median s':>9} {'max s':>7} {'x floor':>8}"
    print(f"{head} {'goal x':>7}  goal")
    missed = []
    for name, laps in times.items():
        median = statistics.median(laps)
        ratio = median / floor
        verdict = ("PASS" if ratio <= goal else "MISS") if name in HELD else "-"
        held = f"{goal:.1f}" if name in HELD else "-"
        print(
            f"{name:<16} {min(laps):>7.3f} {median:>9.3f} {max(laps):>7.3f} "
            f"{ratio:>8.2f} {held:>7}  {verdict}"
        )
        if verdict == "MISS":
            missed.append(name)
    load = os.getloadavg()[0]
    python = sys.version.split()[0]
    print(
        f"{args.runs} rounds; {args.history:,} runs of {args.recipes} recipes in the database; "
        f"1-minute load average {load:.2f}; Python {python}"
    )
    print(f"goal: {GOAL_SECONDS} s where the floor is {REFERENCE_FLOOR_S} s, so {goal:.1f} floors")
    for name in missed:
        print(f"GOAL MISSED: {name} median is more than {goal:.1f} x the floor")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
