"""``bounded_result``, the rule the three integrations apply to a framework's tool result:
valid UTF-8 for the model and the session, cut to the limits with the whole saved."""

from __future__ import annotations

from pathlib import Path

from contextree import OverflowStore
from contextree._truncation import TruncationLimits
from contextree.integrations._results import bounded_result

SMALL = TruncationLimits(max_lines=10, max_bytes=200, max_line_chars=100)


def test_text_that_fits_is_returned_as_it_is(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "spill")
    cut = bounded_result("héllo\nworld", store=store)
    assert (cut.text, cut.truncated, cut.saved_path) == ("héllo\nworld", False, None)
    assert not (tmp_path / "spill").exists()


def test_undecodable_bytes_are_saved_as_they_were(tmp_path: Path) -> None:
    raw = b"".join(b"caf\xe9-%d.txt\n" % i for i in range(100))  # Latin-1 names, as listdir
    text = raw.decode("utf-8", "surrogateescape")
    cut = bounded_result(text, store=OverflowStore(tmp_path / "spill"), limits=SMALL)
    assert cut.truncated and cut.saved_path is not None
    assert Path(cut.saved_path).read_bytes() == raw  # the whole output, byte for byte
    assert "caf\ufffd-0.txt" in cut.text
    cut.text.encode("utf-8")  # the model and the session get valid UTF-8


def test_surrogates_in_text_that_fits_become_replacements(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "spill")
    cut = bounded_result("name: caf\udce9", store=store)
    assert (cut.text, cut.truncated) == ("name: caf\ufffd", False)


def test_a_lone_half_of_an_emoji_is_saved_as_a_replacement(tmp_path: Path) -> None:
    text = "x\ud83d\n" * 100  # a high surrogate: no byte stands behind it
    cut = bounded_result(text, store=OverflowStore(tmp_path / "spill"), limits=SMALL)
    assert cut.saved_path is not None
    assert Path(cut.saved_path).read_text("utf-8") == "x\ufffd\n" * 100
    cut.text.encode("utf-8")
