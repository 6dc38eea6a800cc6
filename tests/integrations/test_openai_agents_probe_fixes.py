"""Fixes for what a probe found in the Agents SDK session, each driven by the SDK's Runner.

- A tool output is stored, given back and (with the session's ``call_model_input_filter``)
  sent to the model cut to the truncation limits, the whole of it saved to the overflow
  store, as the runtime's tool pipeline does: a 320 KB output was sent whole.
- A lone surrogate (a file name ``os.listdir`` could not decode) in any item is stored as
  U+FFFD instead of ending the run with ``InvalidEntry``.
- ``pop_item`` takes off what ``get_items`` shows last, never a hidden reasoning item, and
  ``get_items(limit)`` never starts with an item whose reasoning item was cut off.

A second probe:

- With the filter, every output past the 64th of a run was cut and saved again on every
  model call (a memo of the latest 64, scanned oldest first): 80 outputs made 1,240 files,
  and the hints changed each call. Each is now cut once, and sent the same every call.
- A path that did not exist (``"sessions"``, even ``"sessions/"``) became one session file
  that every session id shared: bob read alice's conversation. It is a folder of sessions
  now (unless it ends in ``.jsonl``), and one session file refuses another session id.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, ShellTool, function_tool, set_tracing_disabled
from openai.types.responses import ResponseFunctionShellToolCall
from openai.types.responses.response_function_shell_tool_call import Action
from test_openai_agents import Scripted, assert_valid, call, reasoning, text

from contextree import Message, OverflowStore, Session, TruncationLimits
from contextree.entries import MessageEntry
from contextree.errors import InvalidArgument
from contextree.integrations.openai_agents import ContextreeSession
from contextree.markers import TRUNCATION_KEY

set_tracing_disabled(True)

BIG = "".join(f"line {n} of the listing\n" for n in range(14_000))  # 320 KB, 14000 lines


@function_tool
def listing(path: str) -> str:
    """List a directory."""
    return BIG


def shell_call(command: str, call_id: str, id: str) -> ResponseFunctionShellToolCall:
    return ResponseFunctionShellToolCall(type="shell_call", id=id, call_id=call_id,
                                         status="completed", action=Action(commands=[command]))


def outputs(items: list[dict[str, Any]], kind: str = "function_call_output") -> list[Any]:
    return [i["output"] for i in items if i.get("type") == kind]


def tool_messages(s: ContextreeSession) -> list[Any]:
    return [e.message for e in s.session.branch()
            if isinstance(e, MessageEntry) and e.message.role == "tool"]


def test_a_big_tool_output_is_cut_where_stored_and_where_sent(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "overflow")
    path = tmp_path / "chat.jsonl"

    async def main() -> None:
        s = ContextreeSession("chat", path, store=store)
        model = Scripted([[reasoning("rs_1", "look"), call("listing", {"path": "."}, "c1", "fc_1")],
                          [text("listed", "msg_1")], [text("again", "msg_2")]])
        a = Agent(name="a", model=model, tools=[listing])
        config = RunConfig(call_model_input_filter=s.call_model_input_filter)
        await Runner.run(a, "list it", session=s, run_config=config)
        # within the run: the model got the cut output, not 320 KB
        [sent] = outputs(model.inputs[1])
        assert len(sent.encode()) < 60_000 and "line 0 of the listing" in sent
        saved = [p for p in (tmp_path / "overflow").rglob("*") if p.is_file()]
        assert len(saved) == 1 and saved[0].read_text() == BIG   # cut once, kept whole
        assert str(saved[0]) in sent                              # the hint names it
        # the session stores and gives back the same cut output, with its record
        assert outputs(await s.get_items()) == [sent]
        [m] = tool_messages(s)
        assert m.text == sent and m.meta[TRUNCATION_KEY]["saved_path"] == str(saved[0])
        assert m.meta[TRUNCATION_KEY]["total_lines"] == 14_000
        # the next run reads it from the session (the view kept up to date, then rebuilt);
        # the filter leaves it as it is, though its hint takes it over the line limit
        await Runner.run(a, "again", session=s, run_config=config)
        assert outputs(model.inputs[2]) == [sent]
        s._v = None
        assert outputs(await s.get_items()) == [sent]
        s.close()
        again = ContextreeSession("chat", path, store=store)
        model.script.append([text("once more", "msg_3")])
        config = RunConfig(call_model_input_filter=again.call_model_input_filter)
        await Runner.run(a, "once more", session=again, run_config=config)
        assert outputs(model.inputs[3]) == [sent]
        assert outputs(await again.get_items()) == [sent]
        assert len([p for p in (tmp_path / "overflow").rglob("*") if p.is_file()]) == 1
        again.close()

    asyncio.run(main())


def test_limits_apply_to_shell_outputs_keeping_their_end(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "overflow")

    async def main() -> None:
        s = ContextreeSession("chat", limits=TruncationLimits(max_lines=50), store=store)
        model = Scripted([[shell_call("ls -R /", "sc1", "sh_1")], [text("done", "msg_1")]])
        shell = ShellTool(executor=lambda request: BIG)
        a = Agent(name="a", model=model, tools=[shell])
        config = RunConfig(call_model_input_filter=s.call_model_input_filter)
        await Runner.run(a, "list /", session=s, run_config=config)
        for items in (model.inputs[1], await s.get_items()):
            [[entry]] = outputs(items, "shell_call_output")
            stdout = entry["stdout"]
            assert "line 13999 of the listing" in stdout      # a shell keeps its last lines
            assert "line 0 of the listing" not in stdout and len(stdout) < 5_000
        assert len([p for p in (tmp_path / "overflow").rglob("*") if p.is_file()]) == 1
        [m] = tool_messages(s)
        assert m.meta[TRUNCATION_KEY]["direction"] == "tail"

    asyncio.run(main())


SURROGATE = "caf\udcff.txt"  # what os.listdir gives for a file named b"caf\xff.txt"


@function_tool
def files(directory: str) -> str:
    """List the files in a directory."""
    return f"{directory}: {SURROGATE}"


def test_a_lone_surrogate_in_any_item_is_stored_as_a_replacement(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    fixed = "caf\ufffd.txt"

    async def main() -> None:
        s = ContextreeSession("chat", path)
        model = Scripted([[call("files", {"directory": "docs"}, "c1", "fc_1")],
                          [text(f"found {SURROGATE}", "msg_1")]])
        a = Agent(name="a", model=model, tools=[files])
        r = await Runner.run(a, f"look in {SURROGATE}", session=s)
        assert r.final_output == f"found {SURROGATE}"             # the run went on
        # call arguments with one (the SDK's Runner itself fails on those): the surrogate
        # itself, and escaped as a model writes it (valid JSON text, so kept exactly)
        await s.add_items([
            {"type": "function_call", "call_id": "c2", "name": "files",
             "arguments": json.dumps({"directory": SURROGATE}, ensure_ascii=False)},
            {"type": "function_call", "call_id": "c3", "name": "files",
             "arguments": json.dumps({"directory": SURROGATE})},
            {"type": "function_call_output", "call_id": "c2",
             "output": [{"type": "input_text", "text": SURROGATE}]}])
        s.close()
        again = ContextreeSession("chat", path)
        items = await again.get_items()
        assert [i.get("type", "message") for i in items] == [
            "message", "function_call", "function_call_output", "message", "function_call",
            "function_call", "function_call_output"]
        assert "\udcff" not in json.dumps(items, ensure_ascii=False)
        assert items[0]["content"] == f"look in {fixed}"          # user input
        assert items[2]["output"] == f"docs: {fixed}"            # tool output
        assert items[3]["content"][0]["text"] == f"found {fixed}"  # assistant text
        assert json.loads(items[4]["arguments"])["directory"] == fixed   # call arguments
        assert json.loads(items[5]["arguments"])["directory"] == SURROGATE  # kept exactly
        assert items[6]["output"][0]["text"] == fixed
        calls = [c for e in again.session.branch() if isinstance(e, MessageEntry)
                 for c in e.message.tool_calls or ()]
        assert [c.arguments["directory"] for c in calls] == ["docs", fixed, fixed]
        again.close()

    asyncio.run(main())


def test_pop_item_takes_off_what_get_items_shows_last() -> None:
    async def main() -> None:
        s = ContextreeSession("chat")
        model = Scripted([[reasoning("rs_1", "think"), text("hello", "msg_1")]])
        await Runner.run(Agent(name="a", model=model), "hi", session=s)
        shown = await s.get_items()
        assert [i.get("type", "message") for i in shown] == ["message", "reasoning", "message"]
        # the SDK's way to undo a turn: pop the answer, then the question
        assert await s.pop_item() == shown[-1]
        assert await s.get_items() == shown[:1]                   # the reasoning is not shown
        assert await s.pop_item() == shown[0]                     # ... nor popped
        assert await s.get_items() == [] and await s.pop_item() is None

    asyncio.run(main())


def test_a_limit_never_splits_a_reasoning_item_from_its_response() -> None:
    async def main() -> None:
        s = ContextreeSession("chat")
        model = Scripted([[reasoning("rs_1", "plan"), call("listing", {"path": "a"}, "c1", "fc_1"),
                           call("listing", {"path": "b"}, "c2", "fc_2")],
                          [reasoning("rs_2", "sum up"), text("done", "msg_1")]])
        await Runner.run(Agent(name="a", model=model, tools=[listing]), "go", session=s)
        items = await s.get_items()
        kinds = [i.get("type", "message") for i in items]
        assert kinds == ["message", "reasoning", "function_call", "function_call",
                         "function_call_output", "function_call_output", "reasoning", "message"]
        for limit in range(len(items) + 1):
            got = await s.get_items(limit)
            assert_valid(got)
            assert got == items[len(items) - len(got):]
            assert len(got) <= limit
            # no item of the first response without the reasoning item it followed
            if any(i.get("id") in ("fc_1", "fc_2") for i in got):
                assert got[0].get("id") == "rs_1" or got[0].get("role") == "user"
        assert [i.get("type", "message") for i in await s.get_items(5)] == ["reasoning",
                                                                              "message"]
        assert len(await s.get_items(7)) == 7

    asyncio.run(main())


# -- a second probe -------------------------------------------------------------------------

@function_tool
def dump(n: int) -> str:
    """Dump table ``n``."""
    return "".join(f"{n}:{j}\n" for j in range(2_100))  # over the 2000-line limit


def test_each_of_many_big_outputs_in_one_run_is_cut_and_saved_once(tmp_path: Path) -> None:
    """The input filter sees the run's outputs, whole, on every model call: each must be cut
    and saved once and sent the same every time, however many the run holds (a memo of the
    latest 64 cut them all again on every call past the 64th)."""
    n = 110
    store = OverflowStore(tmp_path / "overflow")

    async def main() -> None:
        s = ContextreeSession("chat", tmp_path / "chat.jsonl", store=store)
        model = Scripted([[call("dump", {"n": k}, f"c{k}", f"fc_{k}")] for k in range(n)]
                         + [[text("done", "msg_end")]])
        a = Agent(name="a", model=model, tools=[dump])
        config = RunConfig(call_model_input_filter=s.call_model_input_filter)
        await Runner.run(a, "dump them all", session=s, run_config=config, max_turns=n + 5)
        assert len(model.inputs) == n + 1
        saved = [p for p in (tmp_path / "overflow").rglob("*") if p.is_file()]
        assert len(saved) == n                                    # one file an output
        sent: dict[str, set[str]] = {}
        for inp in model.inputs:
            for i in inp:
                if i.get("type") == "function_call_output":
                    sent.setdefault(i["call_id"], set()).add(i["output"])
        assert sorted(sent) == sorted(f"c{k}" for k in range(n))
        assert all(len(forms) == 1 for forms in sent.values())    # byte-identical every call
        stored = {i["call_id"]: i["output"] for i in await s.get_items()
                  if i.get("type") == "function_call_output"}
        assert stored == {k: next(iter(v)) for k, v in sent.items()}
        assert all(f"{k[1:]}:0\n" in out and len(out.splitlines()) < 2_100
                   for k, out in stored.items())
        s.close()

    asyncio.run(main())


@pytest.mark.parametrize("name", ["sessions", "sessions/", "a/b/sessions"])
def test_a_path_that_does_not_exist_is_a_folder_of_sessions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A missing ``sessions`` was made one file that every session id shared: bob read
    alice's conversation, under her id."""
    monkeypatch.chdir(tmp_path)

    async def main() -> None:
        model = Scripted([[text("noted", "msg_1")], [text("hello", "msg_2")]])
        a = Agent(name="a", model=model)
        alice = ContextreeSession("alice", name)
        await Runner.run(a, "alice's secret: 1234", session=alice)
        alice.close()
        bob = ContextreeSession("bob", name)
        assert bob.session.id == "bob" and await bob.get_items() == []
        await Runner.run(a, "hi", session=bob)
        assert "1234" not in json.dumps(model.inputs[1])
        bob.close()
        folder = tmp_path / name
        assert folder.is_dir()
        assert sorted(p.name for p in folder.iterdir()) == ["alice.jsonl", "bob.jsonl"]
        again = ContextreeSession("alice", Path(name))
        assert [i["content"] for i in await again.get_items()
                if i.get("role") == "user"] == ["alice's secret: 1234"]
        again.close()

    asyncio.run(main())


def test_one_session_file_is_refused_to_another_session_id(tmp_path: Path) -> None:
    """A path ending in ``.jsonl`` (or an existing file) is one session: another session id
    is refused, saying what the file holds and how to share it on purpose."""
    path = tmp_path / "chat.jsonl"

    async def main() -> None:
        alice = ContextreeSession("alice", path)
        assert path.is_file() and alice.session.id == "alice"
        await alice.add_items([{"role": "user", "content": "alice's secret"}])
        alice.close()
        with pytest.raises(InvalidArgument, match=r"holds session 'alice', not 'bob'.*"
                                                  r"directory.*Session\.open"):
            ContextreeSession("bob", path)
        with pytest.raises(InvalidArgument, match="holds session 'alice'"):
            ContextreeSession("bob", str(path))
        assert Session.open(path).id == "alice"            # left as it was, not locked
        shared = ContextreeSession("bob", Session.open(path))  # on purpose
        assert [i["content"] for i in await shared.get_items()] == ["alice's secret"]
        shared.close()
        again = ContextreeSession("alice", path)
        assert len(await again.get_items()) == 1
        again.close()
        with pytest.raises(InvalidArgument, match="names a folder"):
            ContextreeSession("alice", f"{path}/")          # a separator: a folder, not it

    asyncio.run(main())


@pytest.mark.parametrize("how", ["copy", "symlink"])
def test_a_file_in_a_folder_that_holds_another_id_is_refused(tmp_path: Path, how: str) -> None:
    """``bob.jsonl`` made a copy of (or a link to) ``alice.jsonl``: bob would read alice's
    conversation under her id."""
    folder = tmp_path / "sessions"
    alice = ContextreeSession("alice", folder)
    alice.session.append_message(Message.user("alice's secret: 1234"))
    alice.close()
    if how == "copy":
        (folder / "bob.jsonl").write_bytes((folder / "alice.jsonl").read_bytes())
    else:
        (folder / "bob.jsonl").symlink_to(folder / "alice.jsonl")
    with pytest.raises(InvalidArgument, match="holds session 'alice'"):
        ContextreeSession("bob", folder)
    again = ContextreeSession("alice", folder)  # the real one still opens
    assert again.session.id == "alice"
    again.close()


def test_a_folder_given_with_a_tilde_is_under_home(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    s = ContextreeSession("alice", "~/sessions")
    s.close()
    assert (tmp_path / "home" / "sessions" / "alice.jsonl").is_file()
    assert not (tmp_path / "~").exists()
