"""The incremental digest: identifiers from tool output, errors open and resolved, room
used, tool roles from kinds (imported vocabularies included), earlier summaries carried."""

from __future__ import annotations

from typing import Any

import pytest

import contextree as ct
from contextree import Message, ToolCall
from contextree.compaction import CompactionLadder, Digest, SlidingWindow, ToolResults
from contextree.entries import CompactionEntry
from contextree.tokens import EstimateCounter

COUNTER = EstimateCounter()
SHA = "3f9c2e17ab54d0c8e6f1a2b3c4d5e6f708192a3b"


class Builder:
    """Appends a coding-agent conversation; tool calls get unique ids."""

    def __init__(self) -> None:
        self.s = ct.Session.in_memory()
        self.n = 0
        self.s.append_message(Message.system("You are a coding agent."))

    def user(self, text: str) -> None:
        self.s.append_message(Message.user(text))

    def step(self, text: str, name: str, args: dict[str, Any], result: str, *,
             error: bool = False, **meta: Any) -> None:
        self.n += 1
        call = ToolCall(id=f"t{self.n}", name=name, arguments=args)
        self.s.append_message(Message.assistant(text, tool_calls=[call]))
        self.s.append_message(Message.tool(result, tool_call_id=call.id, name=name,
                                           is_error=error, meta=meta or None))

    def filler(self, k: int, lines: int = 40) -> None:
        for i in range(k):
            self.user("ok, continue")
            body = "\n".join(f"    value_{i}_{j} = compute({j})" for j in range(lines))
            self.step("Reading.", "read", {"path": f"src/filler_{self.n}.py"}, body)
            self.s.append_message(Message.assistant("Done."))

    def compact(self, ratio: float = 0.2, **kw: Any) -> ct.compaction.CompactionResult:
        total = COUNTER.count_messages(self.s.build_context().messages)
        return self.s.compact(total, compact_at=0.95, compact_to=ratio, force=True, **kw)

    def summary(self) -> str:
        return self.s.build_context().messages[0].text


def git_log(n: int = 12, planted: int = 5) -> str:
    out = []
    for i in range(n):
        sha = SHA if i == planted else f"{i:02d}" + "0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f80"[:38]
        out += [f"commit {sha}", "Author: Dev <dev@example.com>", "", f"    change {i}", ""]
    return "\n".join(out)


def test_a_sha_found_only_in_tool_output_and_then_used_survives() -> None:
    b = Builder()
    b.user("Find when the parser broke.")
    b.step("Looking at the history.", "shell", {"command": "git log -n 12"}, git_log())
    b.step("That one looks suspicious.", "shell", {"command": f"git show {SHA[:10]} --stat"},
           "src/parser.py | 12 ++++----")
    b.filler(20)
    b.user("ok, continue")
    r = b.compact(0.2)
    assert r.reached_target and r.dropped
    text = b.summary()
    ids = text.split("## Identifiers from tool output that were used\n")[1].split("\n\n")[0]
    assert SHA[:10] in ids  # as the agent used it
    # the other shas of the log were never used: they are not pinned as identifiers
    assert "000a1b2c3d" not in ids


def test_an_error_later_fixed_is_listed_as_resolved_not_current() -> None:
    b = Builder()
    b.user("Make the tests pass.")
    b.step("", "shell", {"command": "pytest -q tests/test_cli.py"},
           "E   ImportError: cannot import name 'Loader'\n1 error", error=True, exit_code=2)
    b.step("Restoring the export.", "edit",
           {"path": "src/cli.py", "old_string": "class _Loader:", "new_string": "class Loader:"},
           "Edited src/cli.py")
    b.step("", "shell", {"command": "pytest -q tests/test_cli.py"}, "3 passed", exit_code=0)
    b.step("", "shell", {"command": "mypy src"}, "src/x.py:3: error: bad type\nFound 1 error",
           error=True, exit_code=1)
    b.filler(20)
    b.user("ok, continue")
    r = b.compact(0.2)
    assert r.reached_target
    text = b.summary()
    open_errors = text.split("## Open errors")[1].split("\n\n")[0]
    resolved = text.split("## Errors since resolved")[1].split("\n\n")[0]
    assert "cannot import name 'Loader'" in resolved and "a later run of it succeeded" in resolved
    assert "cannot import name 'Loader'" not in open_errors
    assert "`mypy src` ended with exit code 1" in open_errors
    assert "src/cli.py: edit 'class _Loader:' -> 'class Loader:'" in text


@pytest.mark.parametrize("ratio", [0.5, 0.2, 0.1])
def test_the_digest_uses_the_room_it_is_given(ratio: float) -> None:
    b = Builder()
    b.user("Refactor the event handlers; keep their names.")
    for i in range(30):
        b.user(f"now handler {i}")
        body = "\n".join(f"def handler_{i}_{j}(event):\n    return event.payload[{j}]"
                         for j in range(30))
        b.step(f"Handler {i} reads its payload by index; I will switch it to keys.", "read",
               {"path": f"src/h{i}.py"}, body)
        b.step("", "shell", {"command": f"pytest -q tests/test_h{i}.py"},
               f"{i} passed", exit_code=0)
    b.user("ok, continue")
    for stages in ([ToolResults(), SlidingWindow(), Digest()], [Digest()]):
        fresh = ct.Session.in_memory()
        for e in b.s.branch():
            fresh.append(e)
        total = COUNTER.count_messages(fresh.build_context().messages)
        r = fresh.compact(total, compact_at=0.95, compact_to=ratio, force=True,
                          ladder=CompactionLadder(stages))
        built = COUNTER.count_messages(fresh.build_context().messages)
        assert built == r.tokens_after
        assert 0.85 * r.target <= r.tokens_after <= r.target, (stages, r.tokens_after, r.target)


def test_claude_code_tool_names_are_known_by_their_kind() -> None:
    b = Builder()
    b.user("Fix the config loader.")
    b.step("", "Read", {"file_path": "/repo/src/config.py"}, "x = 1\n" * 200)
    b.step("", "Edit", {"file_path": "/repo/src/config.py", "old_string": "x = 1",
                        "new_string": "x = 2"},
           "The file /repo/src/config.py has been updated.\n" + "   1→x = 2\n" * 200)
    b.step("", "Bash", {"command": "pytest -q", "description": "Run tests"},
           "Error: Exit code 1\n" + "tests/test_config.py .....\n" * 100
           + "FAILED tests/test_config.py::test_load - KeyError: 'tz'", error=True)
    b.filler(3, lines=5)
    r = b.s.compact(200, ladder=CompactionLadder([ToolResults(keep_recent=1)]),
                    force=True)
    assert r.cleared
    shown = {m.tool_call_id: m.text for m in b.s.build_context().messages if m.role == "tool"}
    assert "do not run it again; read /repo/src/config.py" in shown["t2"]
    assert "Run the command again if you need its output" in shown["t3"]
    assert "KeyError: 'tz'" in shown["t3"]
    b.filler(20)
    b.user("ok, continue")
    r = b.compact(0.2)
    text = b.summary()
    assert "/repo/src/config.py: Edit 'x = 1' -> 'x = 2'" in text
    assert "`pytest -q` ended with exit code 1" in text.split("## Open errors")[1]


def test_codex_patches_name_the_files_they_change() -> None:
    b = Builder()
    b.user("Rename the helper.")
    patch = ("*** Begin Patch\n*** Update File: src/util.py\n@@\n-def old():\n+def new():\n"
             "*** Add File: tests/test_util.py\n+def test_new(): pass\n*** End Patch")
    b.step("", "apply_patch", {"input": patch}, "Success. Updated the following files:\n"
           "M src/util.py\nA tests/test_util.py")
    b.step("", "shell", {"command": ["bash", "-lc", "pytest -q"], "workdir": "/repo"},
           '{"output": "FAILED tests/test_util.py::test_new", "metadata": {"exit_code": 1}}')
    b.filler(20)
    b.user("ok, continue")
    b.compact(0.2)
    text = b.summary()
    files = text.split("## Files changed")[1].split("\n\n")[0]
    assert "src/util.py: apply_patch (a patch)" in files
    assert "tests/test_util.py: apply_patch (a patch)" in files
    errors = text.split("## Open errors")[1].split("\n\n")[0]
    assert "`pytest -q` ended with exit code 1: FAILED tests/test_util.py::test_new" in errors
    assert '"output"' not in errors  # what the command printed, not Codex's JSON wrapper


def test_declared_tool_kinds_decide_the_role() -> None:
    b = Builder()
    b.user("Ship the site.")
    b.step("", "deploy_files", {"path": "site/index.html", "content": "<html>"}, "ok")
    b.filler(20)
    b.user("ok, continue")
    b.compact(0.2, ladder=CompactionLadder(
        [SlidingWindow()], tool_kinds={"deploy_files": ct.ToolKind.WRITE}))
    assert "site/index.html: deploy_files wrote the whole file" in b.summary()


def test_no_heuristic_fires_on_domain_words() -> None:
    """The digest lists what the assistant said, newest last; a message that happens to
    contain "plan" or "decided" is not singled out as the current plan."""
    b = Builder()
    b.user("Add an index to the billing tables.")
    b.s.append_message(Message.assistant("The plan table has no index; the decision table "
                                         "neither."))
    b.filler(6)
    b.s.append_message(Message.assistant("Both indexes are added and the migration runs."))
    b.filler(14)
    b.user("ok, continue")
    b.compact(0.2)
    text = b.summary()
    assert "plan:" not in text.lower() and "decisions" not in text.lower()
    said = text.split("## What the assistant said")[1].split("\n\n")[0]
    assert said.index("The plan table") < said.index("Both indexes are added")


def test_a_summary_without_state_is_carried_verbatim() -> None:
    """A previous summary written by a model (or an import) is never cut head and tail:
    it is carried whole as the first section, and the new state merged after it."""
    b = Builder()
    earlier = "\n".join(f"- fact {i}: the service {i} listens on port {9000 + i}"
                        for i in range(60))
    b.user("Keep going with the migration.")
    b.filler(2)
    leaf = b.s.leaf_id
    b.s.append_compaction(summary=earlier, first_kept_entry_id=leaf, tokens_before=50_000)
    b.filler(20)
    b.user("ok, continue")
    r = b.compact(0.3)
    assert r.reached_target
    text = b.summary()
    assert "## Earlier summary (carried verbatim)\n" + earlier in text
    entry = b.s.get_entry(r.entry_id or "")
    assert isinstance(entry, CompactionEntry) and entry.details["digest"]["earlier"] == [earlier]
