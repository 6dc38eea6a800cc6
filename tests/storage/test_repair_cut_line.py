"""A middle line cut off before its ``parent_id``: its id is still readable, so repair keeps
every entry below it, relinked to the entry before the cut line (and says so)."""

from __future__ import annotations

from pathlib import Path

from contextree import Message, Session
from contextree.entries import MessageEntry
from contextree.storage import repair


def test_repair_relinks_below_a_line_cut_before_its_parent(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = Session.create(path)
    for i in range(28):
        s.append_message(Message.user(f"m{i}"))
    s.close()
    lines = path.read_bytes().split(b"\n")
    cut = lines[5]
    lines[5] = cut[:cut.index(b'"parent_id"')]  # the id survives, the parent does not
    path.write_bytes(b"\n".join(lines))
    report = repair(path)
    assert [n for n, _ in report.quarantined] == [6]
    assert any("now a child of" in why for _, why in report.fixed)
    with Session.open(path, readonly=True) as again:
        texts = [str(e.message.content) for e in again.branch()
                 if isinstance(e, MessageEntry)]
    assert texts == [f"m{i}" for i in range(28) if i != 4]


def test_a_line_cut_inside_its_id_quarantines_what_hangs_below_it(tmp_path: Path) -> None:
    """With the id itself cut, nothing can say which entries hung below it: they are
    quarantined as before, never guessed onto the tree."""
    path = tmp_path / "s.jsonl"
    s = Session.create(path)
    for i in range(6):
        s.append_message(Message.user(f"m{i}"))
    s.close()
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3][:lines[3].index(b'"id"') + 8]
    path.write_bytes(b"\n".join(lines))
    report = repair(path)
    assert len(report.quarantined) == 4  # the cut line and the three below it
    with Session.open(path, readonly=True) as again:
        assert len(again) == 2
