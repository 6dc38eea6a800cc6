"""The compaction digest counts lines as people do: a file "a\nb\nc\n" has 3 lines, and an
output excerpt says how many lines it leaves out, exactly."""

from __future__ import annotations

import contextree as ct
from contextree import Message, ToolCall
from contextree.entries import CompactionEntry
from contextree.tokens import EstimateCounter


def compacted(*steps: tuple[ToolCall, str]) -> ct.Session:
    s = ct.Session.in_memory()
    s.append_message(Message.user("Write the module and run the build."))
    for call, result in steps:
        s.append_message(Message.assistant("", tool_calls=[call]))
        s.append_message(Message.tool(result, tool_call_id=call.id, name=call.name,
                                      meta={"exit_code": 0} if call.name == "shell" else None))
    for _ in range(20):
        s.append_message(Message.user("ok, continue"))
        s.append_message(Message.assistant("Done. " + "x" * 400))
    total = EstimateCounter().count_messages(s.build_context().messages)
    s.compact(total, compact_at=0.95, compact_to=0.2, force=True)
    return s


def test_a_written_file_is_counted_in_its_own_lines() -> None:
    s = compacted(
        (ToolCall(id="w1", name="write", arguments={"path": "three.py",
                                                      "content": "x = 1\ny = 2\nz = 3\n"}), "ok"),
        (ToolCall(id="w2", name="write", arguments={"path": "two.py",
                                                      "content": "x = 1\ny = 2"}), "ok"),
        (ToolCall(id="w3", name="write", arguments={"path": "one.py", "content": "x\n"}), "ok"),
    )
    summary = s.build_context().messages[0].text
    assert "three.py: write wrote the whole file (3 lines)" in summary
    assert "two.py: write wrote the whole file (2 lines)" in summary
    assert "one.py: write wrote the whole file (1 line)" in summary


def test_an_output_excerpt_says_how_many_lines_it_leaves_out() -> None:
    output = "".join(f"step {i}\n" for i in range(10))  # 10 lines, each ending in a newline
    s = compacted((ToolCall(id="r", name="shell", arguments={"command": "make"}), output))
    (entry,) = s.find(CompactionEntry)
    (excerpt,) = [d for d in entry.details["digest"]["details"] if d.startswith("`make`")]
    assert excerpt == "`make`: step 0 | step 1 | … 5 lines … | step 7 | step 8 | step 9"
