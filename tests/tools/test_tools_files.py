"""The read, write and edit tools."""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextree import truncate
from contextree.tools import ToolContext, ToolResult, Workspace, edit, read, write
from contextree.tools._files import MAX_BYTES

HINT = re.compile(r"read\(path=(\"(?:[^\"\\]|\\.)*\"), offset=(\d+), limit=(\d+)"
                  r"(?:, char_offset=(\d+))?\)")


def call(t: Any, ctx: ToolContext, **arguments: Any) -> ToolResult:
    result: ToolResult = t.run(arguments, context=ctx)
    return result


def hint_call(text: str) -> dict[str, Any]:
    """The read(...) call in a hint, as arguments."""
    m = HINT.search(text)
    assert m, text
    args = {"path": json.loads(m.group(1)), "offset": int(m.group(2)), "limit": int(m.group(3))}
    if m.group(4) is not None:
        args["char_offset"] = int(m.group(4))
    return args


def numbered(text: str) -> list[int]:
    return [int(line.split("\t")[0]) for line in text.splitlines() if re.match(r"^ *\d+\t", line)]


# -- read ----------------------------------------------------------------------------------
def test_read_numbers_lines_like_cat_n(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.txt").write_text("alpha\nbeta\n\tgamma\n")
    r = call(read, ctx, path="a.txt")
    assert r.content == "     1\talpha\n     2\tbeta\n     3\t\tgamma"
    assert not r.is_error
    assert r.meta is not None and r.meta["path"] == "a.txt" and "truncated" not in r.meta
    assert read.truncates_itself


def test_read_offset_and_limit(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.txt").write_text("".join(f"l{i}\n" for i in range(1, 11)))
    r = call(read, ctx, path="a.txt", offset=4, limit=3)
    assert numbered(r.content) == [4, 5, 6]
    assert "[Showing lines 4-6 of 10. 4 more lines." in r.content
    assert hint_call(r.content) == {"path": "a.txt", "offset": 7, "limit": 3}
    assert r.meta is not None and r.meta["truncated"]["shown_lines"] == 3
    last = call(read, ctx, path="a.txt", offset=8, limit=3)
    assert numbered(last.content) == [8, 9, 10] and "Showing" not in last.content


def test_read_pages_through_a_long_file_by_following_hints(ws: Path, ctx: ToolContext) -> None:
    (ws / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 5001)))
    seen: list[int] = []
    args: dict[str, Any] = {"path": "big.txt"}
    while True:
        r = call(read, ctx, **args)
        seen += numbered(r.content)
        if "Read more with" not in r.content:
            break
        args = hint_call(r.content)
    assert seen == list(range(1, 5001))
    first = call(read, ctx, path="big.txt")
    assert "[Showing lines 1-2000 of 5000. 3000 more lines." in first.content
    assert hint_call(first.content) == {"path": "big.txt", "offset": 2001, "limit": 2000}
    assert first.meta is not None and first.meta["truncated"]["total_lines"] == 5000


def test_read_hint_has_the_same_form_as_truncation_hint(ws: Path, ctx: ToolContext) -> None:
    text = "".join(f"row {i}\n" for i in range(1, 3001))
    (ws / "t.txt").write_text(text)
    assert ctx.store is not None
    cut = truncate(text, store=ctx.store)
    from_truncation = hint_call(cut.text)
    from_read = hint_call(call(read, ctx, path="t.txt").content)
    assert from_truncation["offset"] == from_read["offset"] == 2001
    # The truncation hint's call works as written, on the saved file outside the workspace.
    r = call(read, ctx, **from_truncation)
    assert not r.is_error, r.content
    assert numbered(r.content)[0] == 2001 and "\trow 2001" in r.content


def test_read_caps_output_bytes(ws: Path, ctx: ToolContext) -> None:
    (ws / "wide.txt").write_text("".join(f"{i:04d}" + "x" * 996 + "\n" for i in range(1, 201)))
    r = call(read, ctx, path="wide.txt")
    body = r.content.split("\n\n[Showing")[0]
    assert len(body.encode()) <= MAX_BYTES
    shown = numbered(r.content)
    assert shown == list(range(1, len(shown) + 1)) and 40 < len(shown) < 60
    assert "(output capped at 50 KB)" in r.content
    assert hint_call(r.content)["offset"] == shown[-1] + 1


def test_read_cuts_long_lines(ws: Path, ctx: ToolContext) -> None:
    (ws / "long.txt").write_text("a" * 5000 + "\nshort\n")
    r = call(read, ctx, path="long.txt")
    first = r.content.splitlines()[0]
    assert first == "     1\t" + "a" * 2000 + "… [line truncated, 5000 chars]"
    assert "     2\tshort" in r.content
    assert r.content.endswith("[1 line longer than 2000 characters cut; read the rest of line 1 "
                              'with read(path="long.txt", offset=1, limit=1, char_offset=2000)]')
    assert r.meta is not None and r.meta["truncated"]["cut_lines"] == 1


def _row(content: str) -> tuple[int, str]:
    """The number and text of the one line a piece of a long line shows."""
    shown = content.split("\n\n[")[0]
    number, text = shown.split("\t", 1)
    assert "\n" not in text
    return int(number), text


def test_read_goes_on_inside_a_cut_line_with_char_offset(ws: Path, ctx: ToolContext) -> None:
    line = "".join("aé中😀"[i % 4] for i in range(180_001))  # 1 to 4 bytes a character
    (ws / "long.txt").write_text("first\n" + line + "\nlast\n")
    r = call(read, ctx, path="long.txt")
    assert r.content.splitlines()[1] == "     2\t" + line[:2000] + "… [line truncated, 180001 chars]"
    args = hint_call(r.content.split("\n\n")[-1])
    assert args == {"path": "long.txt", "offset": 2, "limit": 1, "char_offset": 2000}
    got = line[:2000]
    while True:
        r = call(read, ctx, **args)
        assert not r.is_error, r.content
        number, piece = _row(r.content)
        assert number == 2 and "\ufffd" not in piece
        assert len(f"     2\t{piece}".encode()) + 1 <= MAX_BYTES  # whole characters, capped
        assert line[len(got):].startswith(piece)
        got += piece
        args = hint_call(r.content)
        if "Read more of the line" not in r.content:
            break
        assert f"[Showing characters {len(got) - len(piece) + 1}-{len(got)} of 180001 in " \
               "line 2 (output capped at 50 KB). 1 more line after it." in r.content
        assert args == {"path": "long.txt", "offset": 2, "limit": 1, "char_offset": len(got)}
    assert got == line
    assert f"[Showing line 2 from character {len(got) - len(piece) + 1} of 3. 1 more line." \
        in r.content
    assert args == {"path": "long.txt", "offset": 3, "limit": 1}  # then the next line
    assert r.meta is not None and r.meta["truncated"]["first_line"] == 2
    nxt = call(read, ctx, **args)
    assert nxt.content == "     3\tlast"


def test_read_with_char_offset_goes_on_to_the_next_lines(ws: Path, ctx: ToolContext) -> None:
    (ws / "f.txt").write_bytes(b"x" * 3000 + "é".encode() * 10 + b"\r\nb\r\nc\n")
    r = call(read, ctx, path="f.txt", char_offset=3005)
    assert r.content == "     1\t" + "é" * 5 + "\n     2\tb\n     3\tc"  # no CR, no hint
    r = call(read, ctx, path="f.txt", char_offset=3005, limit=2)
    assert r.content.startswith("     1\t" + "é" * 5 + "\n     2\tb\n\n")
    assert "[Showing line 1 from character 3006 and line 2 of 3. 1 more line. " in r.content
    assert hint_call(r.content) == {"path": "f.txt", "offset": 3, "limit": 2}


def test_read_refuses_a_char_offset_past_the_line(ws: Path, ctx: ToolContext) -> None:
    (ws / "f.txt").write_text("abc\n\nxyz")
    past = call(read, ctx, path="f.txt", char_offset=3)
    assert past.is_error and "char_offset 3 is past the end of line 1 of f.txt, which has " \
        "3 characters; use a char_offset from 0 to 2" in past.content
    empty = call(read, ctx, path="f.txt", offset=2, char_offset=1)
    assert empty.is_error and "which is empty; use a char_offset 0" in empty.content
    assert call(read, ctx, path="f.txt", offset=3, char_offset=2).content == "     3\tz"
    assert "past the end of f.txt" in call(read, ctx, path="f.txt", offset=9,
                                           char_offset=1).content
    assert "char_offset must be 0 or more" in call(read, ctx, path="f.txt",
                                                   char_offset=-1).content
    assert "char_offset applies to a file" in call(read, ctx, path=".", char_offset=1).content


def test_read_offers_char_offset_in_its_schema() -> None:
    spec = json.loads(json.dumps(read.spec()))
    prop = spec["parameters"]["properties"]["char_offset"]
    assert prop["type"] == "integer" and prop["default"] == 0
    assert "\n" not in prop["description"] and "skip" in prop["description"]
    assert "char_offset" not in spec["parameters"]["required"]


def test_read_decodes_bad_utf8_and_crlf(ws: Path, ctx: ToolContext) -> None:
    (ws / "bad.txt").write_bytes(b"caf\xe9\r\nok\r\n")
    r = call(read, ctx, path="bad.txt")
    assert r.content == "     1\tcaf\ufffd\n     2\tok"


def test_read_refuses_binary_files(ws: Path, ctx: ToolContext) -> None:
    (ws / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    r = call(read, ctx, path="img.png")
    assert r.is_error
    assert "img.png is a binary file" in r.content and "\x89" not in r.content


def test_read_lists_directories(ws: Path, ctx: ToolContext) -> None:
    (ws / "b.txt").write_text("")
    (ws / "a_dir").mkdir()
    (ws / "C.md").write_text("")
    r = call(read, ctx, path=".")
    assert r.content == ". is a directory with 3 entries:\nC.md\na_dir/\nb.txt"
    r = call(read, ctx, path=".", offset=2, limit=1)
    assert r.content.splitlines()[1] == "a_dir/"
    assert hint_call(r.content) == {"path": ".", "offset": 3, "limit": 1}


def test_read_missing_file_says_what_to_do(ws: Path, ctx: ToolContext) -> None:
    (ws / "config.yaml").write_text("x")
    r = call(read, ctx, path="config.yml")
    assert r.is_error
    assert "file not found: config.yml" in r.content
    assert "did you mean config.yaml?" in r.content and "glob(" in r.content
    r = call(read, ctx, path="nodir/x.txt")
    assert "does not exist" in r.content


def test_read_offset_errors_and_empty_files(ws: Path, ctx: ToolContext) -> None:
    (ws / "three.txt").write_text("1\n2\n3")
    (ws / "empty.txt").write_text("")
    r = call(read, ctx, path="three.txt", offset=9)
    assert r.is_error and "has 3 lines" in r.content
    assert call(read, ctx, path="three.txt", offset=0).is_error
    assert call(read, ctx, path="three.txt", limit=0).is_error
    assert call(read, ctx, path="three.txt", offset=3).content == "     3\t3"
    assert call(read, ctx, path="empty.txt").content == "empty.txt is empty (0 lines)."


def test_read_is_confined(ws: Path, ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    (ws / "link.txt").symlink_to(tmp_path / "secret.txt")
    for path in ["../secret.txt", str(tmp_path / "secret.txt"), "link.txt"]:
        r = call(read, ctx, path=path)
        assert r.is_error and "outside the workspace root" in r.content
        assert "TOPSECRET" not in r.content


# -- write ---------------------------------------------------------------------------------
def test_write_creates_parents_and_reports(ws: Path, ctx: ToolContext) -> None:
    r = call(write, ctx, path="deep/er/new.txt", content="one\ntwo\nthree")
    assert r.content == "Created deep/er/new.txt: 13 bytes, 3 lines."
    assert r.meta == {"path": "deep/er/new.txt", "bytes": 13, "lines": 3, "created": True}
    assert (ws / "deep/er/new.txt").read_text() == "one\ntwo\nthree"


def test_write_overwrites_atomically_and_keeps_mode(ws: Path, ctx: ToolContext) -> None:
    target = ws / "run.sh"
    target.write_text("old")
    target.chmod(0o751)
    r = call(write, ctx, path="run.sh", content="écho\n")
    assert r.content == "Overwrote run.sh: 6 bytes, 1 line."
    assert target.read_text() == "écho\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert sorted(os.listdir(ws)) == ["run.sh"]  # no temp file left behind


def test_write_refusals(ws: Path, ctx: ToolContext, tmp_path: Path) -> None:
    (ws / "d").mkdir()
    assert "is a directory" in call(write, ctx, path="d", content="x").content
    r = call(write, ctx, path="../escape.txt", content="x")
    assert r.is_error and not (tmp_path / "escape.txt").exists()
    assert ctx.store is not None
    saved = ctx.store.save("x")
    assert call(write, ctx, path=str(saved), content="y").is_error  # readable, not writable


def test_write_without_workspace_uses_cwd(tmp_path: Path) -> None:
    r = write.run({"path": "x.txt", "content": ""}, context=ToolContext(cwd=tmp_path))
    assert r.content == "Created x.txt: 0 bytes, 0 lines."
    assert (tmp_path / "x.txt").exists()


# -- edit ----------------------------------------------------------------------------------
def test_edit_replaces_a_unique_string(ws: Path, ctx: ToolContext) -> None:
    (ws / "m.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    r = call(edit, ctx, path="m.py", old_string="return 2", new_string="return 3")
    assert not r.is_error
    assert (ws / "m.py").read_text().endswith("    return 3\n")
    assert r.content.startswith("Edited m.py: replaced 1 occurrence (first at line 5).")
    assert "     5\t    return 3" in r.content
    assert r.meta == {"path": "m.py", "replacements": 1, "first_line": 5}


def test_edit_multiple_matches_need_context_or_replace_all(ws: Path, ctx: ToolContext) -> None:
    (ws / "m.txt").write_text("x = 1\ny = 2\nx = 1\nx = 1\n")
    r = call(edit, ctx, path="m.txt", old_string="x = 1", new_string="x = 9")
    assert r.is_error
    assert "matches 3 times" in r.content and "lines 1, 3, 4" in r.content
    assert "replace_all" in r.content
    assert (ws / "m.txt").read_text() == "x = 1\ny = 2\nx = 1\nx = 1\n"
    r = call(edit, ctx, path="m.txt", old_string="x = 1", new_string="x = 9", replace_all=True)
    assert "replaced 3 occurrences" in r.content
    assert (ws / "m.txt").read_text() == "x = 9\ny = 2\nx = 9\nx = 9\n"


def test_edit_not_found_messages(ws: Path, ctx: ToolContext) -> None:
    (ws / "m.py").write_text("a\nif x:\n        go()\n")
    r = call(edit, ctx, path="m.py", old_string="nothing", new_string="z")
    assert r.is_error and "old_string was not found in m.py" in r.content
    r = call(edit, ctx, path="m.py", old_string="if x:\n    go()", new_string="z")
    assert "differs only in whitespace or indentation starts at line 2" in r.content
    r = call(edit, ctx, path="m.py", old_string="     2\tif x:", new_string="z")
    assert "line numbers from read output" in r.content


def test_edit_other_refusals(ws: Path, ctx: ToolContext) -> None:
    (ws / "m.txt").write_text("abc")
    (ws / "b.bin").write_bytes(b"a\0b")
    assert "is empty" in call(edit, ctx, path="m.txt", old_string="", new_string="x").content
    assert "the same" in call(edit, ctx, path="m.txt", old_string="a", new_string="a").content
    assert "not found" in call(edit, ctx, path="no.txt", old_string="a", new_string="b").content
    assert "binary" in call(edit, ctx, path="b.bin", old_string="a", new_string="b").content
    assert call(edit, ctx, path="../m.txt", old_string="a", new_string="b").is_error


def test_edit_preserves_crlf_line_endings(ws: Path, ctx: ToolContext) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    r = call(edit, ctx, path="w.txt", old_string="one\ntwo\n", new_string="1\n2\n2b\n")
    assert not r.is_error, r.content
    assert (ws / "w.txt").read_bytes() == b"1\r\n2\r\n2b\r\nthree\r\n"


def test_edit_keeps_undecodable_bytes(ws: Path, ctx: ToolContext) -> None:
    (ws / "l1.txt").write_bytes(b"caf\xe9 = 1\nname = old\n")
    r = call(edit, ctx, path="l1.txt", old_string="old", new_string="new")
    assert not r.is_error
    assert (ws / "l1.txt").read_bytes() == b"caf\xe9 = 1\nname = new\n"
    json.dumps(r.content)  # the snippet is valid text (no lone surrogates)
    assert "caf\ufffd" in r.content


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.text(alphabet="ab \t\u00e9\u4e2d", max_size=30), max_size=60),
    limit=st.integers(min_value=1, max_value=25),
    trailing_newline=st.booleans(),
)
def test_following_read_hints_shows_every_line_once(
    lines: list[str], limit: int, trailing_newline: bool
) -> None:
    text = "\n".join(lines) + ("\n" if trailing_newline and lines else "")
    with tempfile.TemporaryDirectory() as d:
        Path(d, "f.txt").write_text(text, encoding="utf-8")
        ctx = ToolContext(workspace=Workspace(d))
        got: list[str] = []
        args: dict[str, Any] = {"path": "f.txt", "limit": limit}
        while True:
            r = call(read, ctx, **args)
            assert not r.is_error, r.content
            if r.meta and r.meta["total_lines"] == 0:
                break
            body = r.content.split("\n\n[Showing")[0]
            got += [line.split("\t", 1)[1] for line in body.split("\n")]
            if "Read more with" not in r.content:
                break
            args = hint_call(r.content)
            assert args["limit"] == limit
    expected = text.split("\n")
    if text.endswith("\n"):
        expected.pop()
    assert got == (expected if text else [])
