"""The format table names every built-in format without importing its module: listing the
formats, or importing one, imports that format's code alone (an import of pi does not load
Claude Code's reader, the exports or the HTML viewer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import SRC

CHILD = r"""
import json, sys
from contextree.formats import import_session, list_formats
names = [f.name for f in list_formats()]
listed = sorted(m for m in sys.modules if m.startswith("contextree.formats."))
if len(sys.argv) > 1:
    import_session("brute", sys.argv[1], sys.argv[2]).close()
imported = sorted(m for m in sys.modules if m.startswith("contextree.formats."))
print(json.dumps({"names": names, "listed": listed, "imported": imported,
                  "view": "contextree.view" in sys.modules}))
"""

READERS = ["_claude_code", "_codex", "_opencode", "_copilot", "_gemini_cli", "_atif", "_brute",
           "_pi.reader", "_pi.writer", "_claude_code_export", "_readable", "_provider_lists"]


def _run(*args: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, *args], check=True, text=True,
                         capture_output=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin"})
    return dict(json.loads(out.stdout))


def test_listing_the_formats_imports_no_format_module() -> None:
    seen = _run()
    assert {"pi", "claude-code", "brute", "html"} <= set(seen["names"])  # type: ignore[arg-type]
    loaded = {m.removeprefix("contextree.formats.") for m in seen["listed"]}  # type: ignore[attr-defined]
    assert not loaded & set(READERS), sorted(loaded & set(READERS))
    assert seen["view"] is False


def test_an_import_loads_its_own_format_and_works(tmp_path: Path) -> None:
    src = tmp_path / "log.jsonl"
    src.write_text("".join(json.dumps(m) + "\n" for m in [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    seen = _run(str(src), str(tmp_path / "s.jsonl"))
    loaded = {m.removeprefix("contextree.formats.") for m in seen["imported"]}  # type: ignore[attr-defined]
    assert "_brute" in loaded
    assert not loaded & {"_claude_code", "_codex", "_pi.reader", "_readable",
                         "_claude_code_export"}, sorted(loaded)
    assert (tmp_path / "s.jsonl").read_text().count("\n") == 3  # header and two messages


def test_a_format_function_says_what_it_stands_for() -> None:
    from contextree.formats import get_format

    reader = get_format("pi").reader
    assert repr(reader) == "<contextree.formats._pi.read, imported when first called>"


CLI_CHILD = r"""
import json, sys
from contextree.cli.app import main
sys.argv = ["contextree", "import", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    if e.code:
        raise
print(json.dumps(sorted(m for m in sys.modules if m.startswith("contextree.redaction"))))
"""


def test_the_import_command_loads_no_redaction(tmp_path: Path) -> None:
    """Redaction is an export's (and a view's): ``contextree import`` of a Claude Code file,
    whose sub-agent code other formats share with their exports, does not load it."""
    src = tmp_path / "c.jsonl"
    src.write_text(json.dumps({"type": "user", "uuid": "u1", "parentUuid": None,
                               "sessionId": "s1", "timestamp": "2026-01-01T00:00:00.000Z",
                               "message": {"role": "user", "content": "hi"}}) + "\n")
    out = subprocess.run([sys.executable, "-c", CLI_CHILD, "claude-code", str(src), "-o",
                          str(tmp_path / "s.jsonl")], check=True, text=True,
                         capture_output=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin"})
    assert json.loads(out.stdout.splitlines()[-1]) == []
    assert (tmp_path / "s.jsonl").is_file()
