"""``stats`` of an indexed session counts by entry number from its columns; over random
trees (branches, leaf moves, labels, calls priced or not, odd roles, compactions, custom
entries) it gives the figures a pass over whole entries gives, in the same order."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

import contextree as ct
from contextree import _stats
from contextree.storage import _index


def _random_session(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    with ct.Session.create(path, durable=False) as s:
        made: list[str] = []
        for _ in range(rng.randint(20, 120)):
            pick = rng.random()
            if made and pick < 0.12:
                s.move_to(rng.choice(made), "left" if rng.random() < 0.5 else None)
                continue
            if made and pick < 0.18:
                s.set_label(rng.choice(made), f"l{rng.randint(0, 3)}")
                continue
            if pick < 0.22:
                s.append_custom("x", {"n": rng.randint(0, 9)})
                continue
            if made and pick < 0.25:
                branch = [e.id for e in s.branch()]
                s.append_compaction(summary="s", first_kept_entry_id=rng.choice(branch),
                                    tokens_before=100, tokens_after=10)
                continue
            role = rng.choice(["user", "assistant", "tool", "system", "developer"])
            usage = None
            if role == "assistant" and rng.random() < 0.6:
                usage = ct.Usage(input=rng.randint(1, 999), output=rng.randint(0, 99),
                                 total=0, cost=rng.choice([None, 0.0, 0.25]))
            message = ct.Message(role=role, content=f"m{len(made)}", usage=usage,  # type: ignore[arg-type]
                                 model=rng.choice([None, "gpt-4o", "no-such-model"]),
                                 provider=rng.choice([None, "openai"]),
                                 tool_call_id="c" if role == "tool" else None)
            made.append(s.append_message(message))


@pytest.mark.parametrize("seed", range(12))
def test_column_stats_equal_entry_stats(seed: int, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_index, "INDEX_MIN_BYTES", 0)
    path = tmp_path / "s.jsonl"
    _random_session(path, seed)
    ct.Session.open(path, readonly=True).close()  # writes the index
    with ct.Session.open(path, readonly=True) as s:
        taken: list[bool] = []
        real = _stats._tree_stats

        def spy(*args: Any) -> Any:
            taken.append(True)
            return real(*args)

        monkeypatch.setattr(_stats, "_tree_stats", spy)
        fast = _stats.compute_stats(s).to_dict()
        assert taken == [True]

        def refuse(*args: Any) -> Any:
            raise _stats._Stale

        monkeypatch.setattr(_stats, "_tree_stats", refuse)
        slow = _stats.compute_stats(s).to_dict()
    assert orjson.dumps(fast) == orjson.dumps(slow)
