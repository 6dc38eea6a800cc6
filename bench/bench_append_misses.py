"""What a durable append costs with the caches cold, counted rather than timed.

    python bench/bench_append_misses.py          (needs valgrind)

Between two syncs the process sleeps in the kernel, and it wakes with its caches cold: a
durable append pays for every line of code and data it touches, not for its instructions.
On a machine whose fdatasync takes ~150 us, that is what keeps ``Session.append_message``
short of the bare ``os.write`` + ``os.fdatasync`` loop (bench_appends.py), and wall-clock
rounds are too noisy to tell a change of 2 us. Here cachegrind runs the floor and ours with
each sync replaced by a copy of 4 MB (which evicts a 2 MB last-level cache, as the sleep
does), and the figures per append are the difference between a run of 400 and one of 100
appends: instructions, and the cache lines fetched from memory for code and for data (the
copy's own and the garbage collector's are left out). Deterministic: the same code gives
the same figures within a few lines.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

TEXT = "run the tests again, please; then fix what fails"
EVICT = 4 << 20
CACHES = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=2097152,16,64"]
# counted apart from the append: the eviction, and collections of the garbage collector
# (they come every few hundred appends, at a place that varies from run to run)
LEFT_OUT = ("memmove", "memcpy", "gcmodule", "visit_", "_traverse")


def child(kind: str, n: int, folder: Path) -> None:
    """The measured process: ``n`` appends of ``kind`` (floor or ours), each sync an
    eviction."""
    import contextree as ct
    from contextree.entries import MessageEntry, encode_line

    source, target = bytes(EVICT), bytearray(EVICT)

    def evict(fd: object) -> None:
        target[:] = source

    message = ct.Message.user(TEXT)
    if kind == "floor":
        line = encode_line(MessageEntry("0123abcd", "89abcdef", "2026-01-01T00:00:00.000Z",
                                        message=message))
        fd = os.open(folder / "floor.bin", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        for _ in range(n):
            os.write(fd, line)
            evict(fd)
        os.close(fd)
        return
    with ct.Session.create(folder / "ours.jsonl", cwd="/") as s:
        for _ in range(20):  # warm: what a session that has been appended to has made
            s.append_message(message)
        os.fdatasync = evict
        for _ in range(n):
            s.append_message(message)


def counts(path: Path) -> dict[str, list[int]]:
    """Cachegrind's events per function of one output file."""
    out: dict[str, list[int]] = defaultdict(lambda: [0] * 9)
    where = ""
    function = ""
    for line in path.read_text().splitlines():
        if line.startswith("fl="):
            where = line[3:]
        elif line.startswith("fn="):
            function = line[3:]
        elif line[:1].isdigit():
            row = out[f"{where}:{function}"]
            for k, value in enumerate(line.split()[1:]):
                row[k] += int(value)
    return out


def measure(kind: str, folder: Path) -> tuple[float, float, float]:
    """(instructions, code lines, data lines) fetched from memory per append."""
    runs = {}
    for n in (100, 400):
        out = folder / f"{kind}{n}.cg"
        work = folder / f"{kind}{n}"
        work.mkdir()
        subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHES,
                        f"--cachegrind-out-file={out}", sys.executable, __file__, "--child",
                        kind, str(n), str(work)], check=True, capture_output=True)
        runs[n] = counts(out)
    per = [0.0] * 9
    for name, row in runs[400].items():
        if any(part in name for part in LEFT_OUT):
            continue
        before = runs[100].get(name, [0] * 9)
        for k in range(9):
            per[k] += (row[k] - before[k]) / 300
    # events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
    return per[0], per[2], per[5] + per[8]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        child(args[1], int(args[2]), Path(args[3]))
        return 0
    argparse.ArgumentParser(description=__doc__).parse_args(args)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="append-misses-"))
    try:
        floor = measure("floor", folder)
        ours = measure("ours", folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("one durable append with the caches cold (cachegrind; I1/D1 32 KB, LL 2 MB; each "
          "sync replaced by a 4 MB eviction)")
    print(f"{'':28}{'instructions':>14}{'code lines':>12}{'data lines':>12}{'lines':>8}")
    for label, (ir, code, data) in (("os.write + fdatasync", floor),
                                    ("Session.append_message", ours)):
        print(f"  {label:26}{ir:14,.0f}{code:12,.0f}{data:12,.0f}{code + data:8,.0f}")
    extra = ours[1] + ours[2] - floor[1] - floor[2]
    print(f"  lines over the floor: {extra:,.0f} per append (at ~10-15 ns each from a "
          "shared cache, what the wall-clock gap of bench_appends.py is made of)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
