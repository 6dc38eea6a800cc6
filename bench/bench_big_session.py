"""Big sessions in the time of their branch: open + build_context() of a session of
hundreds of megabytes whose current branch holds 1,000 entries, against the read floor.

    python bench/bench_big_session.py                 # 1 GB (written once to a temp dir)
    python bench/bench_big_session.py --size-mb 200   # quicker

The session is a coding agent's: a spine of 1,000 entries (the current branch), and after
each spine entry abandoned side branches of tool calls with results of 1-50 KB, left with a
leaf move back to the spine. Every figure is measured in a fresh process (the page cache
warm) and is the median of ``--repeat`` runs; RSS is the process's peak.

- floor: reading the whole file in 1 MiB blocks (what ``cat`` does);
- cold: the first open, which reads the whole file and writes its index (goal >= 200 MB/s);
- warm: an open through the index (goal <= 50 ms, <= 100 MB RSS);
- full read: an open that ignores the index (what every open cost before it);
- show --context, stats, tree: the CLI on the same session (goal <= 0.3 s, <= 150 MB);
  show and tree also with --no-redact, what they cost without redaction (the baseline of
  its cost: the redactor's set-up and the pass; detect-secrets is imported only for a text
  that may hold what its plugins find). Their CPU time (the least of the runs) is printed
  beside the wall time, which on a shared machine is mostly waiting.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import contextree as ct
from contextree.entries import LeafEntry, MessageEntry, SessionHeader, encode_line

SPINE = 1000
TS = "2026-01-01T00:00:00.000Z"

CHILD = r"""
import json, os, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if mode != "floor":
    from contextree.storage import _index
    import contextree as ct
    t0 = time.perf_counter()  # the import is bench_startup's to measure
if mode == "floor":
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 20):
            pass
    n = 0
else:
    if mode == "full":
        _index.INDEX_MIN_BYTES = 1 << 62
    s = ct.Session.open(path, readonly=True)
    n = len(s.build_context().messages)
    s.close()
t = time.perf_counter() - t0
print(json.dumps({"s": t, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "messages": n}))
"""


def generate(path: Path, size: int, seed: int = 1) -> int:
    """Write the session; return its entry count."""
    rng = random.Random(seed)
    words = ("parser", "session", "token", "branch", "buffer", "retry", "handler", "cache")
    count = 0
    n = 0

    def new_id() -> str:
        nonlocal n
        n += 1
        return f"{n:08x}"

    per_spine = max(0, size // SPINE)
    with open(path, "wb", buffering=8 << 20) as f:
        f.write(encode_line(SessionHeader(id="big", created_at=TS, cwd="/work")))
        parent: str | None = None
        for i in range(SPINE):
            role = "user" if i % 2 == 0 else "assistant"
            eid = new_id()
            f.write(encode_line(MessageEntry(eid, parent, TS, message=ct.Message(
                role=role, content=f"spine {i}: " + " ".join(rng.choices(words, k=30))))))
            count += 1
            spine_id = eid
            written = 0
            while written < per_spine:  # an abandoned side branch
                side_parent = spine_id
                for _ in range(rng.randint(2, 6)):
                    call = new_id()
                    f.write(encode_line(MessageEntry(call, side_parent, TS, message=(
                        ct.Message.assistant("looking", tool_calls=[ct.ToolCall(
                            id=f"c{call}", name="shell", arguments={"command": "pytest -x"})])))))
                    body = "\n".join(" ".join(rng.choices(words, k=10))
                                     for _ in range(rng.randint(15, 750)))
                    result = new_id()
                    line = encode_line(MessageEntry(result, call, TS, message=ct.Message.tool(
                        body, tool_call_id=f"c{call}", name="shell")))
                    f.write(line)
                    written += len(line)
                    count += 2
                    side_parent = result
                f.write(encode_line(LeafEntry(new_id(), side_parent, TS, target_id=spine_id)))
                count += 1
            parent = spine_id
    return count


def child(mode: str, path: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], check=True,
                         capture_output=True, text=True)
    return dict(json.loads(out.stdout))


def cli(args: list[str]) -> dict[str, float]:
    code = ("import resource, sys, time, runpy\n"
            "t0 = time.perf_counter()\n"
            "sys.argv = ['contextree', *sys.argv[1:]]\n"
            "from contextree.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "r = resource.getrusage(resource.RUSAGE_SELF)\n"
            "sys.stderr.write('%f %f %f\\n' % (time.perf_counter() - t0, r.ru_maxrss / 1024, "
            "r.ru_utime + r.ru_stime))\n")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    t, rss, cpu = out.stderr.strip().splitlines()[-1].split()
    return {"s": float(t), "rss_mb": float(rss), "cpu_s": float(cpu)}


def median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "contextree-bench")
    ap.add_argument("--no-cli", action="store_true", help="skip show/stats/tree")
    args = ap.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / f"big-{args.size_mb}mb.jsonl"
    if not path.exists():
        t0 = time.perf_counter()
        entries = generate(path.with_suffix(".tmp"), args.size_mb << 20)
        os.replace(path.with_suffix(".tmp"), path)
        print(f"wrote {path} ({entries} entries) in {time.perf_counter() - t0:.1f} s")
    size_mb = path.stat().st_size / (1 << 20)
    index = Path(f"{path}.index")
    print(f"session: {size_mb:.0f} MB, branch of {SPINE} entries; median of {args.repeat}")

    floor = median([child("floor", path) for _ in range(args.repeat)])
    cold = []
    for _ in range(args.repeat):
        index.unlink(missing_ok=True)
        cold.append(child("cold", path))
    cold_m = median(cold)
    warm = median([child("warm", path) for _ in range(args.repeat)])
    full = median([child("full", path) for _ in range(args.repeat)])

    def row(name: str, r: dict[str, float], goal: str) -> None:
        cpu = f" ({r['cpu_s'] * 1000:.0f} ms CPU)" if "cpu_s" in r else ""
        print(f"  {name:<26} {r['s'] * 1000:9.1f} ms {r['rss_mb']:8.1f} MB RSS  "
              f"{r['s'] / floor['s']:6.2f}x floor   {goal}{cpu}")

    row("floor (read the file)", floor, f"{size_mb / floor['s']:.0f} MB/s")
    row("cold open (builds index)", cold_m, f"{size_mb / cold_m['s']:.0f} MB/s (goal >= 200)")
    row("warm open + build_context", warm, "goal <= 50 ms, <= 100 MB")
    row("full read (no index)", full, f"{full['s'] / warm['s']:.0f}x the warm open")
    if not args.no_cli:
        for name, cmd in (("show --context", ["show", str(path), "--context"]),
                          ("show --context --no-redact", ["show", str(path), "--context",
                                                          "--no-redact"]),
                          ("stats", ["stats", str(path)]), ("tree", ["tree", str(path)]),
                          ("tree --no-redact", ["tree", str(path), "--no-redact"])):
            runs = [cli(cmd) for _ in range(args.repeat)]
            # the CPU time (the process's own, whatever else runs) is the least of the runs
            row(name, {**median(runs), "cpu_s": min(r["cpu_s"] for r in runs)},
                "goal <= 300 ms, <= 150 MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
