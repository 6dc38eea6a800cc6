"""Benchmark: truncation of a 100 MB tool output, and the token estimator on 10 MB.

Run: ``python bench/bench_truncation.py [--mb 100] [--repeat 3]``. Prints MB/s for each
direction (including saving the full output to a temporary overflow store), the MB/s of a
naive ``splitlines()`` + join of the first 2000 lines measured in the same run, their ratio,
and the estimator's throughput.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from contextree import OverflowStore, truncate
from contextree.tokens import EstimateCounter

LEVELS = ("DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR")
WORDS = [
    "request",
    "served",
    "cache",
    "miss",
    "retry",
    "connection",
    "pool",
    "worker",
    "job",
    "queued",
    "done",
    "failed",
]


def log_line(rnd: random.Random, i: int) -> str:
    """One log line; widths vary from a few dozen to a few hundred characters."""
    words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 40)))
    return (
        f"2024-05-01T12:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z "
        f"{rnd.choice(LEVELS):5} svc.worker[{rnd.randint(1, 64)}] id={rnd.getrandbits(48):x} "
        f"{words} elapsed={rnd.random() * 1000:.2f}ms"
    )


def build_output(megabytes: int, seed: int = 7) -> str:
    """A realistic large output: varied log lines plus a few very wide lines (blobs, JSON)."""
    rnd = random.Random(seed)
    block = "\n".join(log_line(rnd, i) for i in range(20_000)) + "\n"
    target = megabytes * 1_000_000
    parts: list[str] = []
    size = 0
    wide = 0
    while size < target:
        parts.append(block)
        size += len(block)
        if wide < 5:
            line = '{"payload": "' + "ab12" * rnd.randint(250_000, 750_000) + '"}\n'
            parts.append(line)
            size += len(line)
            wide += 1
    return "".join(parts)[:target]


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_truncation(text: str, repeat: int) -> None:
    mb = len(text.encode()) / 1e6
    lines = text.count("\n") + 1
    print(f"input: {mb:.1f} MB, {lines:,} lines")

    def naive() -> str:
        return "\n".join(text.splitlines()[:2000])

    naive_rate = mb / timed(naive, repeat)
    print(f"  naive splitlines()+join  {naive_rate:8.0f} MB/s")
    with tempfile.TemporaryDirectory() as tmp:
        store = OverflowStore(Path(tmp) / "spill", gc_interval=None)
        data = text.encode()

        def save_only() -> None:
            store.save(data).unlink()

        save_rate = mb / timed(save_only, repeat)
        print(f"  (saving the full output alone {save_rate:8.0f} MB/s)")
        for direction in ("head", "tail", "middle"):

            def run(direction: str = direction) -> None:
                result = truncate(text, direction=direction, store=store)  # type: ignore[arg-type]
                assert result.truncated and result.saved_path
                Path(result.saved_path).unlink()  # keep the disk and page cache steady

            rate = mb / timed(run, repeat)
            print(
                f"  truncate {direction:6}          {rate:8.0f} MB/s  ({rate / naive_rate:.1f}x naive)"
            )


def bench_estimator(repeat: int) -> None:
    counter = EstimateCounter()
    samples = {
        "ascii prose+code": "The server answered 200 in 12 ms. def f(x): return {'a': x[1:]}\n",
        "mixed with CJK": "The server answered 200 in 12 ms. 服务器在十二毫秒内响应。 Ответ получен.\n",
    }
    for name, sample in samples.items():
        text = (sample * (10_000_000 // len(sample) + 1))[:10_000_000]
        mb = len(text.encode()) / 1e6
        rate = mb / timed(lambda text=text: counter.count_text(text), repeat)
        print(f"  estimator {name:17} {rate:8.0f} MB/s  ({mb:.1f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="size of the output to truncate")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    args = parser.parse_args()
    text = build_output(args.mb)
    bench_truncation(text, args.repeat)
    print("token estimator:")
    bench_estimator(args.repeat)


if __name__ == "__main__":
    main()
