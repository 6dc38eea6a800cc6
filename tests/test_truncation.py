"""Truncation: dual cap, head/tail/middle, multibyte safety, overflow hint, meta marker."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextree import Message, OverflowStore
from contextree._truncation import Dropped, Truncation, human_size, is_truncated, truncate
from contextree.markers import truncation_of

HINT_START = "[Output truncated:"
READ_CALL = re.compile(
    r'read\(path="(?P<path>[^"]+)", offset=(?P<offset>\d+), limit=(?P<limit>\d+)'
    r'(?:, char_offset=(?P<char_offset>\d+))?\)'
)
HEAD_MARK = re.compile(r"… \[line truncated, (\d+) chars\]$")
GAP = re.compile(r"\n?\[… \d+ lines? \(\d+ bytes, [^)]*\) omitted …\]\n?")
TAIL_MARK = re.compile(r"^\[line truncated, (\d+) chars\] …")


def split(t: Truncation) -> tuple[str, str]:
    """(body, hint) of a truncated preview; the body loses at most one trailing newline."""
    i = t.text.rfind(HINT_START)
    assert i >= 0, t.text
    return t.text[:i].removesuffix("\n\n"), t.text[i:]


def read_call(hint: str) -> tuple[str, int, int]:
    m = READ_CALL.search(hint)
    assert m, hint
    return m["path"], int(m["offset"]), int(m["limit"])


def char_offset(hint: str) -> int:
    """The ``char_offset`` of the first read call in ``hint`` (0 when it has none)."""
    m = READ_CALL.search(hint)
    assert m, hint
    return int(m["char_offset"] or 0)


def numbered(n: int, width: int = 0) -> str:
    return "".join(f"line {i}{'x' * width}\n" for i in range(1, n + 1))


# -- nothing to do ------------------------------------------------------------------------


def test_fitting_text_is_returned_unchanged(store: OverflowStore) -> None:
    text = numbered(100)
    t = truncate(text, store=store)
    assert t.text is text
    assert (t.truncated, t.saved_path, t.total_lines, t.shown_lines) == (False, None, 100, 100)
    assert t.total_bytes == len(text.encode())
    assert not store.directory.exists()


def test_fitting_bytes_are_decoded(store: OverflowStore) -> None:
    t = truncate(b"ok \xff\n", store=store)
    assert t.text == "ok \ufffd\n" and not t.truncated


def test_empty(store: OverflowStore) -> None:
    t = truncate("", store=store)
    assert (t.text, t.truncated, t.total_lines, t.total_bytes) == ("", False, 0, 0)


# -- caps ---------------------------------------------------------------------------------


def test_head_lines_cap_first(store: OverflowStore) -> None:
    text = numbered(5000)
    t = truncate(text, store=store)
    body, hint = split(t)
    assert body == numbered(2000).rstrip("\n")
    assert (t.truncated, t.shown_lines, t.total_lines) == (True, 2000, 5000)
    assert "showing lines 1-2000 of 5000" in hint
    path, offset, limit = read_call(hint)
    assert (path, offset, limit) == (t.saved_path, 2001, 2000)
    assert Path(path).read_text() == text


def test_head_bytes_cap_first(store: OverflowStore) -> None:
    text = numbered(100, width=990)  # ~1000 bytes a line
    t = truncate(text, max_bytes=10_000, store=store)
    body, hint = split(t)
    sizes = [len(line.encode()) for line in text.splitlines(keepends=True)]
    fit = max(k for k in range(101) if sum(sizes[:k]) <= 10_000)
    assert fit < 2000  # the byte cap, not the line cap, stopped it
    assert len(body.encode()) + 1 <= 10_000
    assert body.count("\n") + 1 == t.shown_lines == fit
    assert text.startswith(body)
    assert read_call(hint)[1:] == (fit + 1, 100 - fit)  # limit: only what is left


def test_tail_keeps_end_and_points_before_it(store: OverflowStore) -> None:
    text = numbered(5000)
    t = truncate(text, direction="tail", store=store)
    body, hint = split(t)
    assert (body + "\n") == "".join(f"line {i}\n" for i in range(3001, 5001))
    assert "showing lines 3001-5000 of 5000" in hint
    path, offset, limit = read_call(hint)
    assert (offset, limit) == (1001, 2000)  # the 2000 lines just before what was shown
    lines = Path(path).read_text().splitlines()
    assert lines[offset - 1 + limit - 1] == "line 3000"


def test_tail_short_prefix_offset_starts_at_one(store: OverflowStore) -> None:
    t = truncate(numbered(2500), direction="tail", store=store)
    assert read_call(split(t)[1])[1:] == (1, 500)


def test_middle_keeps_both_ends_with_a_gap_line(store: OverflowStore) -> None:
    text = numbered(5000)
    t = truncate(text, direction="middle", store=store)
    body, hint = split(t)
    lines = body.split("\n")
    assert lines[:1000] == [f"line {i}" for i in range(1, 1001)]
    assert lines[-1000:] == [f"line {i}" for i in range(4001, 5001)]
    gap = lines[1000]
    omitted_bytes = len(numbered(4000).encode()) - len(numbered(1000).encode())
    assert gap == f"[… 3000 lines ({omitted_bytes} bytes, {gap.split(', ')[1]}"
    assert t.shown_lines == 2000
    assert "showing lines 1-1000 and 4001-5000 of 5000" in hint
    path, offset, limit = read_call(hint)
    assert (offset, limit) == (1001, 2000)
    assert Path(path).read_text().splitlines()[offset - 1] == "line 1001"


def test_middle_when_whole_text_fits_after_line_cuts(store: OverflowStore) -> None:
    text = "a\n" + "x" * 5000 + "\nb\n"
    t = truncate(text, direction="middle", store=store)
    body, _ = split(t)
    assert body.startswith("a\n" + "x" * 2000 + "… [line truncated, 5000 chars]\nb")
    assert "omitted" not in body


def test_no_trailing_newline(store: OverflowStore) -> None:
    text = numbered(3000).rstrip("\n")
    t = truncate(text, direction="tail", store=store)
    assert split(t)[0].endswith("line 3000")
    assert t.total_lines == 3000


# -- long lines ---------------------------------------------------------------------------


def test_single_long_line_is_cut_and_saved(store: OverflowStore) -> None:
    text = "short\n" + "y" * 12345 + "\nend\n"
    t = truncate(text, store=store)
    body, hint = split(t)
    assert body.split("\n") == ["short", "y" * 2000 + "… [line truncated, 12345 chars]", "end"]
    assert t.truncated and t.shown_lines == 3
    path, offset, limit = read_call(hint)
    assert (offset, limit, char_offset(hint)) == (2, 1, 2000)  # the rest of line 2
    assert Path(path).read_text() == text


@pytest.mark.parametrize("direction", ["head", "tail", "middle"])
def test_ten_megabyte_line(store: OverflowStore, direction: str) -> None:
    line = "S" + "é" * 2_500_000 + "m" * 5_000_000 + "E"  # 10 MB, multibyte start
    t = truncate(line, direction=direction, store=store)  # type: ignore[arg-type]
    body, _ = split(t)
    chars = len(line)
    if direction == "tail":
        assert body == f"[line truncated, {chars} chars] …" + line[-2000:]
    else:
        assert body == line[:2000] + f"… [line truncated, {chars} chars]"
    assert (t.total_lines, t.shown_lines) == (1, 1)
    assert Path(t.saved_path or "").read_bytes() == line.encode()


@pytest.mark.parametrize("direction", ["head", "tail"])
def test_ten_megabyte_line_beyond_byte_cap(store: OverflowStore, direction: str) -> None:
    """With the line cap off, the byte cap cuts inside the line: tail keeps the last bytes."""
    line = "".join(chr(0x4E00 + i % 500) for i in range(3_500_000)) + "THE END"
    t = truncate(line, direction=direction, max_line_chars=10**9, store=store)  # type: ignore[arg-type]
    body, hint = split(t)
    raw = body.encode()
    assert len(raw) <= 51200
    assert "\ufffd" not in body
    if direction == "tail":
        assert line.endswith(body) and body.endswith("THE END")
        assert len(raw) >= 51200 - 3
    else:
        assert line.startswith(body)
    assert "in part" in hint
    assert read_call(hint)[1:] == (1, 1)
    assert char_offset(hint) == (0 if direction == "tail" else len(body))  # what is unseen


# -- multibyte safety (property) ----------------------------------------------------------

CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\ufffd\r")
TEXT = st.text(alphabet=CHARS, max_size=400) | st.lists(
    st.text(alphabet=CHARS, max_size=60), max_size=40
).map("\n".join)


def _strip_head_marker(line: str) -> str:
    return HEAD_MARK.sub("", line)


def _strip_tail_marker(line: str) -> str:
    return TAIL_MARK.sub("", line)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=TEXT,
    max_lines=st.integers(1, 12),
    max_bytes=st.integers(1, 300),
    max_line_chars=st.integers(1, 80),
    direction=st.sampled_from(["head", "tail", "middle"]),
)
def test_preview_is_valid_and_within_caps(
    store: OverflowStore,
    text: str,
    max_lines: int,
    max_bytes: int,
    max_line_chars: int,
    direction: str,
) -> None:
    t = truncate(
        text,
        max_lines=max_lines,
        max_bytes=max_bytes,
        max_line_chars=max_line_chars,
        direction=direction,  # type: ignore[arg-type]
        store=store,
    )
    t.text.encode("utf-8")  # valid UTF-8: no split characters, no lone surrogates
    assert t.total_bytes == len(text.encode())
    if not t.truncated:
        assert t.text == text
        return
    assert Path(t.saved_path or "").read_bytes() == text.encode()
    i = t.text.rfind(HINT_START)
    body = t.text[:i]
    assert "\ufffd" not in body  # no character was cut in two
    body = body.removesuffix("\n\n")  # the blank line before the hint (+ a final newline)
    kept = GAP.sub("", body) if direction == "middle" else body
    assert len(kept.encode()) <= max_bytes
    lines = body.split("\n") if body else []
    assert len(lines) <= max_lines + (1 if direction == "middle" else 0)
    originals = text.split("\n")
    if direction == "head":
        for got, want in zip(lines, originals, strict=False):
            assert want.startswith(_strip_head_marker(got))
    elif direction == "tail":  # the body's final newline went with the blank line above
        originals = text.removesuffix("\n").split("\n")
        for got, want in zip(reversed(lines), reversed(originals), strict=False):
            assert want.endswith(_strip_tail_marker(got))
    for line in lines:
        stripped = _strip_tail_marker(_strip_head_marker(line))
        assert len(stripped) <= max_line_chars or line.startswith("[…")


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=600), max_bytes=st.integers(1, 100))
def test_arbitrary_bytes_never_crash_and_are_saved_verbatim(
    store: OverflowStore, data: bytes, max_bytes: int
) -> None:
    for direction in ("head", "tail", "middle"):
        t = truncate(data, max_bytes=max_bytes, max_lines=5, direction=direction, store=store)  # type: ignore[arg-type]
        t.text.encode("utf-8")
        if t.truncated:
            assert Path(t.saved_path or "").read_bytes() == data


def test_multibyte_at_byte_cap_is_never_split(store: OverflowStore) -> None:
    text = "€" * 100  # 3 bytes each; a cap of 100 falls inside a character
    for direction in ("head", "tail"):
        t = truncate(text, max_bytes=100, max_line_chars=1000, direction=direction, store=store)  # type: ignore[arg-type]
        body, _ = split(t)
        assert body == "€" * 33


# -- non-UTF-8, hint, store ---------------------------------------------------------------


def test_non_utf8_bytes_saved_verbatim(store: OverflowStore) -> None:
    data = b"".join(b"row %d \xff\xfe\xc3\n" % i for i in range(5000))
    t = truncate(data, store=store)
    assert Path(t.saved_path or "").read_bytes() == data
    body, _ = split(t)
    assert body.startswith("row 0 \ufffd\ufffd\ufffd\nrow 1 ")


def body_size(t: Truncation, direction: str) -> int:
    """UTF-8 bytes of the preview's kept text (no hint, no gap line)."""
    body, _ = split(t)
    return len((GAP.sub("", body) if direction == "middle" else body).encode())


@pytest.mark.parametrize("direction", ["head", "tail", "middle"])
def test_undecodable_bytes_count_as_sent_against_the_byte_cap(
    store: OverflowStore, direction: str
) -> None:
    """An undecodable byte becomes U+FFFD, 3 bytes: the cap holds for the text sent."""
    binary = bytes(range(256)) * 1200  # a newline every 256 bytes, half of them undecodable
    t = truncate(binary, direction=direction, store=store)  # type: ignore[arg-type]
    assert 40_000 < body_size(t, direction) <= 50 * 1024
    fits_raw = b"\xff" * 40_000  # 40 KB as written, 120 KB as sent: one line, cut
    t = truncate(fits_raw, max_line_chars=100_000, direction=direction, store=store)  # type: ignore[arg-type]
    assert t.truncated and 50_000 < body_size(t, direction) <= 50 * 1024
    assert Path(t.saved_path or "").read_bytes() == fits_raw


def test_binary_output_hint_offers_the_shell_not_read(store: OverflowStore) -> None:
    """``read`` refuses a file with a NUL byte near its start: the hint offers ``xxd`` from
    the first byte not shown, and ``file``."""
    data = b"\x00\x01\x02\n" * 50_000
    t = truncate(data, store=store)
    _, hint = split(t)
    assert "read(" not in hint and "It is binary (it contains NUL bytes)" in hint
    shown = len(b"\x00\x01\x02\n") * t.shown_lines
    assert f"`xxd -s {shown} -l 1024 {t.saved_path}`" in hint
    assert f"`file {t.saved_path}`" in hint
    tail = truncate(data, direction="tail", store=store)
    assert f"`xxd -s 0 -l 1024 {tail.saved_path}`" in split(tail)[1]
    text = truncate(b"\xff\n" * 50_000, store=store)  # not UTF-8, but no NUL: read shows it
    assert READ_CALL.search(split(text)[1])


def test_a_middle_dropped_before_truncation_is_told(store: OverflowStore) -> None:
    """The caller kept only both ends (``dropped``): the hint gives the whole output's size
    and what was lost, and the record the whole output's totals."""
    lost = Dropped(size=3_000_000, newlines=30_000)
    text = numbered(3000).encode() + lost.marker() + numbered(3000).encode()
    t = truncate(text, direction="tail", store=store, dropped=lost)
    _, hint = split(t)
    assert hint.startswith("[Output truncated: the output was 36000 lines (")
    assert "3000000 bytes (2.9 MB, 30000 lines) in its middle were dropped" in hint
    assert "the saved file is not the full output" in hint
    assert f"of the 6002 kept ({human_size(len(text))})" in hint
    assert "Kept output saved to" in hint and "(the gap marked)" in hint
    whole = len(text) - len(lost.marker()) + 3_000_000
    assert (t.total_lines, t.total_bytes) == (36000, whole)
    assert Path(t.saved_path or "").read_bytes() == text
    unknown = truncate(text, store=store, dropped=Dropped(size=3_000_000))
    assert f"the output was {human_size(whole)}, more" in split(unknown)[1]
    assert unknown.total_lines == 6002  # the kept text's: the whole output's were not counted


def test_hint_offset_reads_exactly_the_next_line(store: OverflowStore) -> None:
    text = "".join(f"{i}:{'z' * (i % 97)}\n" for i in range(1, 9001))
    for direction in ("head", "tail", "middle"):
        t = truncate(text, direction=direction, store=store)  # type: ignore[arg-type]
        body, hint = split(t)
        path, offset, limit = read_call(hint)
        saved = Path(path).read_text().split("\n")
        window = saved[offset - 1 : offset - 1 + limit]
        shown = {line for line in body.split("\n")}
        assert not shown & set(window), direction  # the window is all unseen lines
        if direction == "head":
            assert offset == t.shown_lines + 1
        if direction == "tail":
            first_shown = int(body.split("\n")[0].split(":")[0])
            assert offset + limit == first_shown


def test_default_store_respects_contextree_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTREE_HOME", str(tmp_path / "home"))
    t = truncate(numbered(3000), session_id="sess-1", label="bash")
    assert t.saved_path is not None
    saved = Path(t.saved_path)
    assert saved.is_relative_to(tmp_path / "home" / "tool-output")
    assert saved.name.endswith("-bash.txt")


def test_unsavable_output_still_truncates(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    t = truncate(numbered(3000), store=OverflowStore(blocker / "spill"))
    assert t.truncated and t.saved_path is None
    assert "could not be saved" in t.text and t.shown_lines == 2000


def test_meta_marker_round_trip(store: OverflowStore) -> None:
    t = truncate(numbered(3000), direction="tail", store=store)
    msg = Message.tool(t.text, tool_call_id="c1", name="bash", meta=t.meta())
    back = Message.from_dict(msg.to_dict())
    assert is_truncated(back.meta)
    assert back.meta == {
        "truncated": {
            "saved_path": t.saved_path,
            "total_lines": 3000,
            "total_bytes": t.total_bytes,
            "shown_lines": 2000,
            "direction": "tail",
        }
    }
    assert not is_truncated(None)
    assert not is_truncated({})
    assert not is_truncated({"kind": "x"})
    assert "Output truncated" not in Message.tool("plain", tool_call_id="c2").text


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("cap", ["max_lines", "max_bytes", "max_line_chars"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_bad_caps(cap: str, value: object, store: OverflowStore) -> None:
    with pytest.raises(ValueError, match=f"{cap} must be a positive integer"):
        truncate("x", store=store, **{cap: value})  # type: ignore[arg-type]


def test_bad_direction_and_type(store: OverflowStore) -> None:
    with pytest.raises(ValueError, match="direction must be"):
        truncate("x", direction="sideways", store=store)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str or bytes"):
        truncate(123, store=store)  # type: ignore[arg-type]


def test_meta_is_the_truncation_record(store: OverflowStore) -> None:
    t = truncate(numbered(3000), store=store)
    record = t.record()
    assert truncation_of(t.meta()) == record
    assert (record.direction, record.shown_lines, record.saved_path) == ("head", 2000,
                                                                         t.saved_path)


# -- following the hint through lines longer than the cap, with the read tool alone ---------

ANY_READ = re.compile(r'read\(path="[^"]+", offset=\d+, limit=\d+(?:, char_offset=\d+)?\)')
NUMBERED = re.compile(r"^ *(\d+)\t(.*)$")


def read_args(found: str) -> dict[str, object]:
    m = READ_CALL.fullmatch(found)
    assert m, found
    args: dict[str, object] = {"path": m["path"], "offset": int(m["offset"]),
                               "limit": int(m["limit"])}
    if m["char_offset"]:
        args["char_offset"] = int(m["char_offset"])
    return args


def run_read(ctx: object, args: dict[str, object]) -> str:
    from contextree.tools import ToolContext, read

    assert isinstance(ctx, ToolContext)
    r = read.run(args, context=ctx)
    assert not r.is_error, r.content
    return r.content


def json_result(size: int) -> str:
    """A dict as a tool result becomes: one line of JSON, here with characters of 1 to 4
    UTF-8 bytes throughout, so pieces end next to multi-byte characters."""
    value, i = {}, 0
    while True:
        value[f"k{i}"] = ["é中😀" * (i % 5) + "x" * (i % 3), i, {"ok": i % 2 == 0}]
        i += 1
        if i % 1000 == 0 and len(json.dumps(value, ensure_ascii=False).encode()) >= size:
            return json.dumps(value, ensure_ascii=False)


def test_a_one_line_json_result_is_read_to_its_end_by_following_the_hint(
        tmp_path: Path) -> None:
    from contextree.tools import ToolContext, Workspace

    text = json_result(1_400_000)
    assert "\n" not in text and len(text.encode()) >= 1_400_000
    store = OverflowStore(tmp_path / "spill", gc_interval=None)
    (tmp_path / "ws").mkdir()
    ctx = ToolContext(workspace=Workspace(tmp_path / "ws"), store=store)
    t = truncate(text, store=store)
    body, hint = split(t)
    pieces = [HEAD_MARK.sub("", body)]
    found = ANY_READ.findall(hint)
    assert len(found) == 1 and read_args(found[0])["char_offset"] == len(pieces[0]) == 2000
    calls = 0
    while found:
        args = read_args(found[0])
        assert args["char_offset"] == sum(map(len, pieces))  # exactly the next unseen piece
        content = run_read(ctx, args)
        shown, _, notice = content.partition("\n\n[")
        number, piece = NUMBERED.fullmatch(shown).groups()  # type: ignore[union-attr]
        assert number == "1" and piece and "\ufffd" not in piece
        assert len(shown.encode()) + 1 <= 50 * 1024  # the byte cap holds for every piece
        pieces.append(piece)
        found = ANY_READ.findall(notice)
        calls += 1
        assert calls < 100
    assert "".join(pieces) == text
    ends = [sum(map(len, pieces[: i + 1])) for i in range(len(pieces) - 1)]
    assert any(not text[e - 1 : e + 1].isascii() for e in ends)  # cut beside a multi-byte one
    assert calls <= len(text.encode()) // 40_000 + 2  # pieces of ~50 KB, not of 2000 chars


def _learn(known: dict[int, str], whole: set[int], line: int, start: int, text: str,
           complete: bool) -> None:
    have = known.get(line, "")
    assert start <= len(have), (line, start, len(have))  # no call skips unseen characters
    overlap = have[start : start + len(text)]
    assert text.startswith(overlap) or overlap.startswith(text)  # what is shown twice agrees
    if start + len(text) > len(have):
        known[line] = have[:start] + text
    if complete:
        whole.add(line)


def _follow_everything(ctx: object, preview: str, hint: str) -> tuple[dict[int, str], set[int]]:
    """What a model sees by making every read call the hints name, each once, starting
    from a head preview (its lines numbered from 1)."""
    known: dict[int, str] = {}
    whole: set[int] = set()
    for n, line in enumerate(preview.split("\n"), start=1):
        shortened = HEAD_MARK.search(line) is not None
        _learn(known, whole, n, 0, HEAD_MARK.sub("", line), not shortened)
    queue = ANY_READ.findall(hint)
    done: set[str] = set()
    while queue:
        found = queue.pop(0)
        if found in done:
            continue
        done.add(found)
        assert len(done) < 500
        args = read_args(found)
        content = run_read(ctx, args)
        shown, _, notices = content.partition("\n\n[")
        in_line = "Read more of the line" in notices  # the first line goes on past the cap
        for i, row in enumerate(shown.split("\n")):
            m = NUMBERED.fullmatch(row)
            assert m, row
            start = int(args.get("char_offset", 0)) if i == 0 else 0  # type: ignore[call-overload]
            text = HEAD_MARK.sub("", m[2])
            complete = text == m[2] and not (i == 0 and in_line)
            _learn(known, whole, int(m[1]), start, text, complete)
        queue += ANY_READ.findall(notices)
    return known, whole


@pytest.mark.parametrize("max_lines", [2000, 20])  # every line shown / lines left out too
def test_huge_lines_among_short_ones_are_read_whole_by_following_hints(
        tmp_path: Path, max_lines: int) -> None:
    from contextree.tools import ToolContext, Workspace

    huge = {5: json_result(300_000), 17: "😀中é" * 60_001 + "!", 31: json_result(120_000)}
    lines = [huge.get(n, f"short line {n} é中😀") for n in range(1, 41)]
    text = "\n".join(lines) + "\n"
    store = OverflowStore(tmp_path / "spill", gc_interval=None)
    (tmp_path / "ws").mkdir()
    ctx = ToolContext(workspace=Workspace(tmp_path / "ws"), store=store)
    t = truncate(text, store=store, max_lines=max_lines)
    body, hint = split(t)
    cut_first = 'offset=5, limit=1, char_offset=2000)'
    assert cut_first in hint  # the rest of the first shortened line, by name
    known, whole = _follow_everything(ctx, body, hint)
    assert whole == set(range(1, 41))
    assert "\n".join(known[n] for n in range(1, 41)) + "\n" == text
