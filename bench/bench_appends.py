"""Durable appends against the device's fsync floor, measured side by side.

    python bench/bench_appends.py [--n 1000] [--rounds 5]

The floor is a bare loop of ``os.write`` + ``os.fdatasync`` of the very lines a session
writes; then the same appends through ``Session.append_message``, on a small session and on
one of 3 MB (which has an index beside it: one more unsynced ``write`` per append). Rounds
alternate between the three so that the device's mood is shared. Goal: within 10% of the
floor.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import contextree as ct
from contextree.entries import MessageEntry, encode_line

TEXT = "run the tests again, please; then fix what fails"


def floor(path: Path, n: int) -> float:
    line = encode_line(MessageEntry("0123abcd", "89abcdef", "2026-01-01T00:00:00.000Z",
                                    message=ct.Message.user(TEXT)))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        t = time.perf_counter()
        for _ in range(n):
            os.write(fd, line)
            os.fdatasync(fd)
        return n / (time.perf_counter() - t)
    finally:
        os.close(fd)


def ours(path: Path, n: int, *, grown: int) -> float:
    with ct.Session.create(path, cwd="/") as s:
        if grown:
            with s.batch():
                while (s.storage.health().size or 0) < grown:
                    s.append_message(ct.Message.user("x" * 4000))
        msg = ct.Message.user(TEXT)
        t = time.perf_counter()
        for _ in range(n):
            s.append_message(msg)
        return n / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="appends-"))
    rates: dict[str, list[float]] = {"floor": [], "small": [], "indexed": []}
    try:
        for r in range(args.rounds):
            rates["floor"].append(floor(tmp / f"floor{r}.bin", args.n))
            rates["small"].append(ours(tmp / f"small{r}.jsonl", args.n, grown=0))
            rates["indexed"].append(ours(tmp / f"big{r}.jsonl", args.n, grown=3 << 20))
            assert Path(f"{tmp / f'big{r}.jsonl'}.index").exists()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(rates["floor"])
    print(f"durable appends, median of {args.rounds} rounds of {args.n}")
    for name, label in (("floor", "os.write + fdatasync"), ("small", "Session, small"),
                        ("indexed", "Session, 3 MB, indexed")):
        rate = statistics.median(rates[name])
        print(f"  {label:<24} {rate:9.0f}/s  {rate / base:5.2f}x floor")
    print("  goal: within 10% of the floor (>= 0.90x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
