"""Durable appends against the device's fsync floor, measured side by side.

    python bench/bench_appends.py [--n 300] [--rounds 21]

The floor is a bare loop of ``os.write`` + ``os.fdatasync`` of the very lines a session
writes; then the same appends through ``Session.append_message``, on a small session and on
one of 3 MB (which has an index beside it: one more unsynced ``write`` per append). Rounds
alternate between the three in a rotating order so that the device's mood is shared, and
each round's figures are compared with its own floor. Goal: within 10% of the
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
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="appends-"))
    kinds = ("floor", "small", "indexed")
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        for r in range(args.rounds):
            for kind in kinds[r % 3:] + kinds[:r % 3]:  # each goes first in turn
                if kind == "floor":
                    rates[kind].append(floor(tmp / f"floor{r}.bin", args.n))
                elif kind == "small":
                    rates[kind].append(ours(tmp / f"small{r}.jsonl", args.n, grown=0))
                else:
                    rates[kind].append(ours(tmp / f"big{r}.jsonl", args.n, grown=3 << 20))
                    assert Path(f"{tmp / f'big{r}.jsonl'}.index").exists()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"durable appends, {args.rounds} rounds of {args.n} in a rotating order; the ratio "
          "is the median of each round's paired ratio to its floor")
    for name, label in (("floor", "os.write + fdatasync"), ("small", "Session, small"),
                        ("indexed", "Session, 3 MB, indexed")):
        ratios = [x / f for x, f in zip(rates[name], rates["floor"], strict=True)]
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        print(f"  {label:<24} {statistics.median(rates[name]):9.0f}/s  "
              f"{statistics.median(ratios):5.2f}x floor (quartiles {q[0]:.2f} .. {q[2]:.2f})")
    print("  goal: within 10% of the floor (>= 0.90x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
