"""Benchmark the session core: append rates, and open + build_context against a naive parse.

    python bench/bench_sessions.py                 # generates bench/data/ files if missing
    python bench/bench_sessions.py --sizes 10000   # only the 10k-message session

Prints a table:
- appends/s, durable (write + fdatasync per append) and batched (``with session.batch()``),
  for small messages;
- for 10k- and 100k-message generated sessions (``bench/gen_sessions.py``): the time of
  ``Session.open(path)`` + ``build_context()``, and the peak RSS it adds above the process's
  after-import RSS, as a ratio to the file size; the same for a baseline that only
  ``orjson.loads`` every line of the file (keeping the results, as a naive loader would);
  and the ratio ours/baseline.

Each load measurement runs in a fresh subprocess (median of ``--repeat`` runs, ours and the
baseline interleaved; the file is read once beforehand so both see a warm page cache). Peak RSS is VmHWM from
/proc/self/status, reset to the current RSS after imports through /proc/self/clear_refs
(falling back to ru_maxrss where that is not available).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

TARGETS = {
    "durable": 2_000.0,  # appends/s, at least
    "batched": 100_000.0,  # appends/s, at least
    "time_ratio": 1.0,  # ours / baseline, at most
    "rss_ratio": 2.0,  # peak RSS delta / file size, at most
}


# -- measurements that run in a child process ----------------------------------------------

def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _child(mode: str, path: str) -> None:
    import resource

    import orjson

    import contextree as ct

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak (VmHWM) to the current RSS
        reset = True
    except OSError:
        reset = False
    base = _rss_kib("VmRSS")
    if not reset:
        base = max(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    t = time.perf_counter()
    if mode == "ours":
        session = ct.Session.open(path)
        ctx = session.build_context()
        n = len(ctx.messages)
    else:
        with open(path, "rb") as f:
            rows = [orjson.loads(line) for line in f]
        n = len(rows)
    seconds = time.perf_counter() - t
    peak = _rss_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "rss_delta": (peak - base) * 1024, "n": n}))
    if mode == "ours":
        session.close()


def _run_child(mode: str, path: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(path)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def measure_pair(path: Path, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """Medians over ``repeat`` runs of ours and the baseline, interleaved so that a busy
    machine slows both alike."""
    runs: dict[str, list[dict[str, float]]] = {"ours": [], "baseline": []}
    for _ in range(repeat):
        for mode in runs:
            runs[mode].append(_run_child(mode, path))
    med = {mode: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "rss_delta")}
           for mode, rs in runs.items()}
    return med["ours"], med["baseline"]


# -- append rates (in this process) ----------------------------------------------------------

def append_rates(n_durable: int, n_batched: int) -> tuple[float, float]:
    import contextree as ct

    tmp = Path(tempfile.mkdtemp(prefix="appends-", dir=DATA))
    try:
        msg = ct.Message.user("run the tests again, please; then fix what fails")
        with ct.Session.create(tmp / "durable.jsonl", cwd="/") as s:
            t = time.perf_counter()
            for _ in range(n_durable):
                s.append_message(msg)
            durable = n_durable / (time.perf_counter() - t)
        with ct.Session.create(tmp / "batched.jsonl", cwd="/") as s:
            t = time.perf_counter()
            with s.batch():
                for _ in range(n_batched):
                    s.append_message(msg)
            batched = n_batched / (time.perf_counter() - t)  # includes the final sync
        return durable, batched
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- driver ------------------------------------------------------------------------------------

def ensure_session(messages: int, seed: int) -> Path:
    path = DATA / f"session-{messages // 1000}k-seed{seed}.jsonl"
    if not path.exists():
        sys.path.insert(0, str(HERE))
        from gen_sessions import generate

        tmp = path.with_suffix(".partial")
        if tmp.exists():
            tmp.unlink()
        info = generate(tmp, messages, seed)
        tmp.rename(path)
        print(f"generated {path.name}: {info['bytes'] / 1e6:.1f} MB, {info['lines']} lines",
              file=sys.stderr)
    return path


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000],
                    help="messages per generated session")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--durable-n", type=int, default=5_000)
    ap.add_argument("--batched-n", type=int, default=200_000)
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    DATA.mkdir(exist_ok=True)

    rows: list[tuple[str, str, str, str]] = []
    durable, batched = append_rates(args.durable_n, args.batched_n)
    rows.append(("append, durable (fsync each)", f"{durable:,.0f}/s",
                 f">= {TARGETS['durable']:,.0f}/s", verdict(durable >= TARGETS["durable"])))
    rows.append(("append, batched", f"{batched:,.0f}/s", f">= {TARGETS['batched']:,.0f}/s",
                 verdict(batched >= TARGETS["batched"])))

    for messages in args.sizes:
        path = ensure_session(messages, args.seed)
        size = path.stat().st_size
        with open(path, "rb") as f:  # warm the page cache for both sides
            while f.read(16 << 20):
                pass
        ours, base = measure_pair(path, args.repeat)
        label = f"{messages // 1000}k msgs, {size / 2**20:.0f} MiB"
        t_ratio = ours["seconds"] / base["seconds"]
        rows.append((f"{label}: open+build_context", f"{ours['seconds']:.3f} s", "", ""))
        rows.append((f"{label}: orjson.loads baseline", f"{base['seconds']:.3f} s", "", ""))
        rows.append((f"{label}: time ours/baseline", f"{t_ratio:.2f}x",
                     f"<= {TARGETS['time_ratio']:.1f}x",
                     verdict(t_ratio <= TARGETS["time_ratio"])))
        r_ours = ours["rss_delta"] / size
        r_base = base["rss_delta"] / size
        rows.append((f"{label}: peak RSS delta ours",
                     f"{ours['rss_delta'] / 2**20:.0f} MiB = {r_ours:.2f}x file",
                     f"<= {TARGETS['rss_ratio']:.1f}x file",
                     verdict(r_ours <= TARGETS["rss_ratio"])))
        rows.append((f"{label}: peak RSS delta baseline",
                     f"{base['rss_delta'] / 2**20:.0f} MiB = {r_base:.2f}x file",
                     f"ours/baseline {ours['rss_delta'] / base['rss_delta']:.2f}x", ""))

    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    head = ("measurement", "result", "target", "")
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=True)]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    for r in [head, tuple("-" * w for w in widths), *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
