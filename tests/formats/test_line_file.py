"""``LineFile`` reads a JSON Lines file's lines again by their place: in the file's order
from blocks of 1 MiB, out of order or past a block by reads of their own, the same values
either way."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from contextree.errors import CorruptLine
from contextree.formats import _base
from contextree.formats._base import LineFile, read_json_spans


def _file(path: Path, sizes: list[int]) -> list[dict[str, object]]:
    rows = [{"n": k, "text": "x" * size} for k, size in enumerate(sizes)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


@pytest.mark.parametrize("order", ["file", "shuffled", "backwards"])
def test_lines_read_again_in_any_order_are_the_lines(tmp_path: Path, order: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_base, "_READ_BUFFER", 4096)  # many blocks, and lines past one
    path = tmp_path / "log.jsonl"
    rows = _file(path, [random.Random(k).choice([10, 300, 2000, 9000]) for k in range(200)])
    spans = [span for _, span, _ in read_json_spans(path)]
    picked = list(range(len(spans)))
    if order == "shuffled":
        random.Random(1).shuffle(picked)
    elif order == "backwards":
        picked.reverse()
    lines = LineFile(path)
    try:
        assert [lines.line(spans[k]) for k in picked] == [rows[k] for k in picked]
    finally:
        lines.close()


def test_a_line_cut_short_since_the_first_read_is_a_corrupt_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    _file(path, [50, 50, 50])
    spans = [span for _, span, _ in read_json_spans(path)]
    with open(path, "r+b") as f:  # the source changed between the two passes
        f.truncate(spans[2][0] + 10)
    lines = LineFile(path)
    try:
        assert lines.line(spans[0])["n"] == 0
        with pytest.raises(CorruptLine) as err:
            lines.line(spans[2])
        assert err.value.line == 3
    finally:
        lines.close()
