"""The estimate remembers short texts (the planner counts the same tool names, arguments and
one-line outputs thousands of times): a remembered count is the count, and the memory stays
bounded."""

from __future__ import annotations

import random

from contextree import tokens
from contextree.tokens import EstimateCounter


def _texts(seed: int) -> list[str]:
    rnd = random.Random(seed)
    alphabet = "abc XYZ 0123 {}[]:,\"'\n\té€漢😀"
    return ["".join(rnd.choice(alphabet) for _ in range(rnd.choice([0, 1, 5, 40, 159, 160,
                                                                     161, 400])))
            for _ in range(400)]


def test_remembered_counts_are_the_counts() -> None:
    counter = EstimateCounter()
    for text in _texts(1) * 2:  # the second round is answered from memory
        fresh = EstimateCounter()._estimate(text) if text else 0
        assert counter.count_text(text) == fresh
    assert counter._short  # short texts were remembered...
    assert all(len(t) <= tokens._SHORT_TEXT for t in counter._short)  # ...only those


def test_the_memory_is_bounded() -> None:
    counter = EstimateCounter()
    for i in range(tokens._SHORT_MEMO + 10):
        counter.count_text(f"t{i}")
    assert len(counter._short) <= tokens._SHORT_MEMO
    assert counter.count_text("t5") == EstimateCounter()._estimate("t5")
