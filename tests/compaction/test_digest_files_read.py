"""The digest keeps the artifact trail of files only read (not just the files changed): a
folded ``read`` of a config file is named in the summary, and survives the next
compaction through the stored state."""

from __future__ import annotations

import contextree as ct
from contextree import Message
from contextree.compaction import CompactionLadder, Digest, DigestState


def _session() -> ct.Session:
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    s.append_message(Message.user("Check the limits configuration, then fix the loader."))
    call = ct.ToolCall(id="r0", name="read", arguments={"path": "config/ingest/limits.toml"})
    s.append_message(Message.assistant("Reading the config.", tool_calls=[call]))
    s.append_message(Message.tool("[quota]\nwindow = 60\n", tool_call_id="r0", name="read"))
    for i in range(30):
        s.append_message(Message.user(f"step {i}: go on"))
        edit = ct.ToolCall(id=f"e{i}", name="edit", arguments={
            "path": f"src/m{i}.py", "old_string": "a", "new_string": "b"})
        s.append_message(Message.assistant("Editing.", tool_calls=[edit]))
        s.append_message(Message.tool("ok " * 400, tool_call_id=f"e{i}", name="edit"))
    return s


def test_a_file_only_read_is_named_in_the_summary_and_carried() -> None:
    s = _session()
    first = s.compact(12_000, ladder=CompactionLadder([Digest()]), force=True)
    assert "config/ingest/limits.toml" in first.summary
    assert "## Files read" in first.summary
    state = DigestState.from_json(s.get_entry(first.entry_id).details["digest"])
    assert state is not None and "config/ingest/limits.toml" in state.read
    for i in range(30, 45):
        s.append_message(Message.user(f"step {i}: go on"))
        s.append_message(Message.assistant("More work. " * 60))
    again = s.compact(12_000, ladder=CompactionLadder([Digest()]), force=True)
    assert "config/ingest/limits.toml" in again.summary
    # A file that was changed is listed as changed, not again as read.
    section = again.summary.split("## Files read", 1)[1].split("##", 1)[0]
    assert "src/m0.py" not in section
