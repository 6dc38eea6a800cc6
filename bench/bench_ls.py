"""``contextree ls`` on a big session: peak memory, time and the entry estimate.

    python bench/bench_ls.py [--megabytes 200] [--seed 1]

Generates a realistic session of about the given size with ``gen_sessions`` (heavy-tailed
tool outputs, no name), then measures in a fresh interpreter the peak-RSS growth of
``describe`` (what ``ls`` does per file) and its time, and compares the entry count with the
exact one. As a baseline it also prints the estimate the tail alone would give (the previous
method: the average line length of the last 64 KB).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gen_sessions import generate

MEASURE = textwrap.dedent("""
    import json, resource, sys, time
    from pathlib import Path
    from contextree.cli.listing import describe
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    listing = describe(Path(sys.argv[1]))
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"growth_kb": after - before, "peak_kb": after, "seconds": seconds,
                      "entries": listing.entries, "exact": listing.entries_exact}))
""")


def tail_estimate(path: Path, tail_bytes: int = 64 * 1024) -> int:
    """The previous estimate: lines in the last 64 KB, scaled by the body's size."""
    with open(path, "rb") as f:
        first = len(f.readline())
        size = path.stat().st_size
        f.seek(max(first, size - tail_bytes))
        lines = f.read().split(b"\n")[1:]
    lines = [x for x in lines if x.strip()]
    used = sum(len(x) + 1 for x in lines)
    return round(len(lines) * (size - first) / used) if used else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.jsonl"
        messages = max(args.megabytes * 240, 1000)  # about 4.2 KB a message on average
        generate(path, messages, args.seed)
        size = path.stat().st_size
        with open(path, "rb") as f:
            exact = sum(1 for _ in f) - 1
        out = subprocess.run([sys.executable, "-c", MEASURE, str(path)], capture_output=True,
                             text=True, check=True)
        figures = json.loads(out.stdout)
        old = tail_estimate(path)
    print(f"file: {size / 2**20:.0f} MiB, {exact} entries")
    print(f"ls describe: {figures['seconds'] * 1000:.0f} ms, peak RSS growth "
          f"{figures['growth_kb'] / 1024:.1f} MiB ({figures['growth_kb'] * 1024 / size:.3f}x "
          f"the file; whole process {figures['peak_kb'] / 1024:.0f} MiB)")
    print(f"entries: {figures['entries']} ({(figures['entries'] - exact) / exact:+.1%}), "
          f"exact={figures['exact']}; the tail alone: {old} ({(old - exact) / exact:+.1%})")


if __name__ == "__main__":
    main()
