"""Fuzzing session files: mutated files raise only contextree's own errors, never hang, and
every file ``repair`` has been through opens (and needs no second repair).

Mutations of small valid sessions (deterministic seeds): bit flips, truncation at every
offset, duplicated and swapped lines, invalid UTF-8, deep nesting, huge numbers, parent
cycles, dangling leaf moves and labels, unknown types, a second header, a byte order mark,
NULs. Each mutated file goes through what a user does: a read-only open and what is read
from it (context, tree, stats), a writable open and an append, ``repair`` (forced when the
file is not a session), and an open of the repaired file. A sample also goes through the
command line (``verify``, ``show``, ``tree``, ``stats``, ``repair --dry-run``).
"""

from __future__ import annotations

import os
import random
import shutil
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

import contextree as ct
from contextree.cli import app
from contextree.entries import UnknownEntry, encode_line

Mutation = Callable[[list[bytes], random.Random], list[bytes]]


@pytest.fixture(autouse=True)
def no_syncing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Syncing to disk is beside the point here, and most of the time."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "fdatasync", lambda fd: None)


def base_session(path: Path) -> None:
    """A small session with every kind of entry, a branch, labels and unknown things."""
    with ct.Session.create(path, cwd="/w", metadata={"k": [1, {"a": None}]}) as s:
        u = s.append_message(ct.Message.user("fix the bug in é"))
        s.append_message(ct.Message.assistant("reading", tool_calls=[
            ct.ToolCall(id="c1", name="read", arguments={"path": "a.py", "n": 3})]))
        s.append_message(ct.Message.tool("print('x')\n" * 3, tool_call_id="c1"))
        s.set_label(u, "start")
        s.append_model_change("openai", "gpt")
        s.append_custom("app", {"nested": {"list": [1, 2.5, "s", True, None]}})
        s.move_to(u, "went another way")
        s.append_message(ct.Message.user("second branch"))
        s.append_compaction(summary="so far", first_kept_entry_id=u, tokens_before=100)
        s.append(UnknownEntry({"type": "future_kind", "id": "fut1", "parent_id": s.leaf_id,
                               "timestamp": "2026-01-01T00:00:00.000Z", "payload": [1]}))
        s.set_name("fuzz")


# -- mutations --------------------------------------------------------------------------------

def bit_flips(lines: list[bytes], rng: random.Random) -> list[bytes]:
    data = bytearray(b"\n".join(lines) + b"\n")
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    return bytes(data).split(b"\n")


def duplicated_line(lines: list[bytes], rng: random.Random) -> list[bytes]:
    i = rng.randrange(len(lines))
    return [*lines[:i + 1], lines[i], *lines[i + 1:]]


def swapped_lines(lines: list[bytes], rng: random.Random) -> list[bytes]:
    out = list(lines)
    i, j = rng.randrange(len(out)), rng.randrange(len(out))
    out[i], out[j] = out[j], out[i]
    return out


def invalid_utf8(lines: list[bytes], rng: random.Random) -> list[bytes]:
    out = list(lines)
    i = rng.randrange(len(out))
    at = rng.randrange(len(out[i]) + 1)
    out[i] = out[i][:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"]) + (
        out[i][at:])
    return out


def _json_lines(lines: list[bytes]) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in lines if x.strip()]


def _dump(items: list[Any]) -> list[bytes]:
    return [x if isinstance(x, bytes) else orjson.dumps(x) for x in items]


def deep_nesting(lines: list[bytes], rng: random.Random) -> list[bytes]:
    depth = rng.choice([150, 199, 201, 300, 1_100, 20_000])
    deep = b"[" * depth + b"]" * depth
    out = list(lines)
    i = rng.randrange(len(out))
    target = rng.choice(["data", "metadata", "field"])
    item = orjson.loads(out[i])
    key = target if target in item else "extra_field"
    item[key] = None
    out[i] = orjson.dumps(item).replace(f'"{key}":null'.encode(), f'"{key}":'.encode() + deep)
    return out


def huge_numbers(lines: list[bytes], rng: random.Random) -> list[bytes]:
    out = list(lines)
    i = rng.randrange(len(out))
    number = rng.choice([b"1e400", b"-1e400", b"9" * 40, b"-" + b"9" * 25, b"18446744073709551616",
                         b"1" + b"0" * 400, b"0.0000000001e-400"])
    item = orjson.loads(out[i])
    key = rng.choice(["tokens_before", "data", "n", "version", "extra"])
    item[key] = None
    out[i] = orjson.dumps(item).replace(f'"{key}":null'.encode(), f'"{key}":'.encode() + number)
    return out


def parent_cycle(lines: list[bytes], rng: random.Random) -> list[bytes]:
    items = _json_lines(lines)
    entries = [x for x in items[1:] if "id" in x]
    a, b = rng.choice(entries), rng.choice(entries)
    a["parent_id"] = b["id"]
    b["parent_id"] = a["id"]
    return _dump(items)


def dangling_target(lines: list[bytes], rng: random.Random) -> list[bytes]:
    items = _json_lines(lines)
    last = items[-1]["id"]
    kind = rng.choice(["leaf", "label"])
    extra = {"type": kind, "id": "dangle", "parent_id": last, "timestamp": "t",
             "target_id": rng.choice(["ghost", items[1]["id"], "dangle"])}
    if kind == "label":
        extra["label"] = "start"
    at = rng.randrange(1, len(items) + 1)
    items.insert(at, extra)
    if rng.random() < 0.5:
        items.append({"type": "message", "id": "after", "parent_id": "dangle",
                      "timestamp": "t", "message": {"role": "user", "content": "x"}})
    return _dump(items)


def unknown_type(lines: list[bytes], rng: random.Random) -> list[bytes]:
    items = _json_lines(lines)
    item = rng.choice(items)
    item["type"] = rng.choice(["future", "", 7, None, "session", "label"])
    return _dump(items)


def second_header(lines: list[bytes], rng: random.Random) -> list[bytes]:
    out = list(lines)
    out.insert(rng.randrange(1, len(out) + 1), out[0])
    return out


def odd_bytes(lines: list[bytes], rng: random.Random) -> list[bytes]:
    out = list(lines)
    choice = rng.randrange(5)
    if choice == 0:
        out[0] = b"\xef\xbb\xbf" + out[0]
    elif choice == 1:
        out.append(b"\0" * rng.randint(1, 200))
    elif choice == 2:
        out.insert(rng.randrange(len(out)), b"   ")
    elif choice == 3:
        out = [b"\xff\xfe" + b"".join(out)]
    else:
        out = [x.replace(b'"id":', b'"id":null,"x":', 1) if rng.random() < 0.2 else x
               for x in out]
    return out


MUTATIONS: dict[str, Mutation] = {
    "bit_flips": bit_flips,
    "duplicated_line": duplicated_line,
    "swapped_lines": swapped_lines,
    "invalid_utf8": invalid_utf8,
    "deep_nesting": deep_nesting,
    "huge_numbers": huge_numbers,
    "parent_cycle": parent_cycle,
    "dangling_target": dangling_target,
    "unknown_type": unknown_type,
    "second_header": second_header,
    "odd_bytes": odd_bytes,
}
CASES_PER_MUTATION = 40


# -- what a user does with a file -------------------------------------------------------------

class Outcomes(Counter[str]):
    """How each step ended: ``step:ok`` or ``step:<error class>``."""

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        try:
            result = fn()
        except ct.ContextreeError as e:
            self[f"{name}:{type(e).__name__}"] += 1
            return None
        self[f"{name}:ok"] += 1
        return result


def read_everything(path: Path, readonly: bool) -> int:
    with ct.Session.open(path, readonly=readonly) as s:
        s.build_context()
        s.tree()
        s.stats()
        s.labels()
        s.ambiguous_labels()
        for e in s.entries():
            s.branch(e.id if not isinstance(e, ct.entries.LeafEntry) else None)
        if not readonly:
            s.append_message(ct.Message.user("after the damage"))
        return len(s)


def exercise(path: Path, outcomes: Outcomes) -> None:
    """Everything a user might do with ``path``; library errors are fine, nothing else is."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ct.storage.TornLineWarning)
        outcomes.step("open_readonly", lambda: read_everything(path, True))
        copy = path.with_name(path.name + ".w")
        shutil.copyfile(path, copy)
        outcomes.step("open_writable", lambda: read_everything(copy, False))
        copy.unlink()
        dry = outcomes.step("repair_dry_run", lambda: ct.repair(path, dry_run=True))
        report = outcomes.step("repair", lambda: ct.repair(path))
        if report is None and dry is None:
            report = ct.repair(path, force=True)  # not a session: forced, it must work
        # Whatever repair did, the file now opens, writable, and needs no second repair.
        read_everything(path, readonly=False)
        again = ct.repair(path)
        assert not again.changed, (path.read_bytes()[:300], again)


runner = CliRunner()


def cli_never_crashes(path: Path) -> None:
    for command in (["verify"], ["show"], ["tree"], ["stats"], ["repair", "--dry-run"]):
        result = runner.invoke(app, [*command, str(path)])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            command, path.read_bytes()[:200], result.exception)


def mutated_files(tmp_path: Path) -> Iterator[tuple[str, bytes]]:
    base = tmp_path / "base.jsonl"
    base_session(base)
    lines = base.read_bytes().splitlines()
    for name, mutate in MUTATIONS.items():
        rng = random.Random(f"{name}-2026")
        for _ in range(CASES_PER_MUTATION):
            try:
                mutated = mutate(list(lines), rng)
            except (ValueError, KeyError, TypeError, IndexError, orjson.JSONDecodeError):
                continue  # the mutation did not apply to this line
            yield name, b"\n".join(mutated).rstrip(b"\n") + b"\n"


@pytest.mark.slow
def test_mutated_sessions_raise_only_library_errors_and_repair_always_works(
        tmp_path: Path) -> None:
    outcomes = Outcomes()
    cases = 0
    for n, (name, data) in enumerate(mutated_files(tmp_path)):
        path = tmp_path / f"case{n}.jsonl"
        path.write_bytes(data)
        try:
            if n % 7 == 0:
                cli_never_crashes(path)
            exercise(path, outcomes)
        except Exception as e:
            raise AssertionError(f"{name}, case {n}: {e!r}") from e
        cases += 1
    assert cases >= len(MUTATIONS) * CASES_PER_MUTATION * 0.9
    assert outcomes["repair:ok"] + outcomes["repair:InvalidHeader"] == cases
    print(f"\n{cases} mutated files; outcomes: {dict(sorted(outcomes.items()))}")


@pytest.mark.slow
def test_truncation_at_every_offset(tmp_path: Path) -> None:
    base = tmp_path / "base.jsonl"
    with ct.Session.create(base, cwd="/") as s:
        a = s.append_message(ct.Message.user("one"))
        s.set_label(a, "l")
        s.append_custom("c", {"x": [1]})
    data = base.read_bytes()
    outcomes = Outcomes()
    whole = [e.id for e in ct.Session.open(base, readonly=True).entries()]
    line_ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    for cut in range(len(data) + 1):
        path = tmp_path / f"cut{cut}.jsonl"
        path.write_bytes(data[:cut])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ct.storage.TornLineWarning)
            kept = outcomes.step("open_readonly", lambda p=path: [  # type: ignore[misc]
                e.id for e in ct.Session.open(p, readonly=True).entries()])
        if kept is not None:  # a cut costs at most the line it falls in
            assert kept == whole[:len(kept)]
            assert len(kept) >= sum(1 for end in line_ends if end <= cut) - 1
        exercise(path, outcomes)
    print(f"\n{len(data) + 1} truncations; outcomes: {dict(sorted(outcomes.items()))}")


@pytest.mark.parametrize("seed", range(3))
def test_random_garbage_files(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    outcomes = Outcomes()
    for n in range(30):
        path = tmp_path / f"g{n}.jsonl"
        size = rng.choice([0, 1, 10, 100, 5000])
        path.write_bytes(bytes(rng.randrange(256) for _ in range(size)))
        exercise(path, outcomes)
    header = encode_line(ct.entries.SessionHeader(id="x", created_at="t"))
    for n in range(30):  # a valid header, then garbage
        path = tmp_path / f"h{n}.jsonl"
        path.write_bytes(header + bytes(rng.randrange(256) for _ in range(rng.randrange(300))))
        exercise(path, outcomes)
    assert outcomes
