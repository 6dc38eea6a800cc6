"""Start-up: how long ``import contextree`` and short commands take, against the floor.

    python bench/bench_startup.py [--repeat 21]

Each measurement is the wall time of a fresh interpreter (``sys.executable``, this
environment), from ``subprocess`` start to exit, warm (each command runs twice first):

- the floor: an empty interpreter (``python -c pass``);
- ``import contextree``;
- ``contextree --version`` and ``contextree ls EMPTY_DIR``, run as the console script runs
  them (``from contextree.cli import main; main()``).

The warm-up runs also write the bytecode caches (``PYTHONDONTWRITEBYTECODE`` is dropped
from the environment of every run), as an installed package has them; without them each
run compiles every module it imports again. The commands run interleaved, round after round, so that a busy machine slows them alike;
the table gives the median of each, the ratio to the floor's median, the target and
whether it is met. ``--importtime`` also prints the slowest imports of each (``-X
importtime``), to see what a change brought in.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_sessions import verdict

CLI = "import sys; sys.argv[0] = 'contextree'; from contextree.cli import main; sys.exit(main())"


def commands(empty_dir: str) -> dict[str, tuple[list[str], float | None]]:
    """Each measurement: its interpreter arguments and its target in seconds (the floor has
    none)."""
    return {
        "empty interpreter (floor)": (["-c", "pass"], None),
        "import contextree": (["-c", "import contextree"], 0.080),
        "contextree --version": (["-c", CLI, "--version"], 0.150),
        "contextree ls EMPTY_DIR": (["-c", CLI, "ls", empty_dir], 0.150),
    }


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - started


def slowest_imports(args: list[str], n: int = 8) -> list[str]:
    """The ``n`` imports with the largest cumulative time (``-X importtime``)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args], check=True,
                          capture_output=True, text=True, env=ENV)
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.split("|")
            if cumulative.strip().isdigit():
                rows.append((int(cumulative), name.rstrip()))
    rows.sort(reverse=True)
    return [f"{us / 1000:7.1f} ms {name}" for us, name in rows[:n]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=21, help="rounds (median of each)")
    ap.add_argument("--importtime", action="store_true",
                    help="also print the slowest imports of each command")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as empty_dir:
        measured = commands(empty_dir)
        for argv_ in (a for a, _ in measured.values()):
            for _ in range(2):  # warm: the page cache and the bytecode caches
                wall(argv_)
        times: dict[str, list[float]] = {name: [] for name in measured}
        for _ in range(args.repeat):
            for name, (argv_, _) in measured.items():
                times[name].append(wall(argv_))
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        floor = medians["empty interpreter (floor)"]
        rows = []
        for name, (_, target) in measured.items():
            m = medians[name]
            rows.append((name, f"{m * 1000:.0f} ms", f"{m / floor:.1f}x",
                         f"<= {target * 1000:.0f} ms" if target else "",
                         verdict(m <= target) if target else ""))
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, median of "
              f"{args.repeat} runs each, warm")
        head = ("measurement", "wall", "/ floor", "target", "")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        for r in [head, tuple("-" * w for w in widths), *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if args.importtime:
            for name, (argv_, _) in measured.items():
                if argv_ != ["-c", "pass"]:
                    print(f"\nslowest imports (cumulative, -X importtime): {name}")
                    print("\n".join(slowest_imports(argv_)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
