"""Typed seams: markers and tool facts decoded once, typed event payloads, stop reasons, and no
``Any`` where a real type exists at the edges (exporters, integrations)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, OverflowStore, Session, ToolCall
from contextree.compaction import StageReport
from contextree.entries import CompactionEntry, MessageEntry
from contextree.errors import InvalidArgument
from contextree.formats import import_session
from contextree.markers import (
    BranchSummaryMarker,
    CompactionSummaryMarker,
    CustomMessageMarker,
    EditMeta,
    ForeignMarker,
    GlobMeta,
    GrepMeta,
    InterruptedMarker,
    InterruptedReplyMarker,
    Kind,
    ListMeta,
    Marker,
    ReadMeta,
    ShellMeta,
    WriteMeta,
    marker_of,
)
from contextree.models import ScriptedModel
from contextree.runtime import (
    CompactedPayload,
    Env,
    Event,
    EventPayload,
    MaxIterations,
    StopReason,
    TurnEndPayload,
)

DATA = Path(__file__).parent / "data" / "formats"

# -- markers ------------------------------------------------------------------------------------


def test_every_kind_has_one_typed_marker_that_round_trips() -> None:
    examples: list[Marker] = [
        CompactionSummaryMarker(entry_id="e1", tokens_before=900, summary="s", source="codex",
                                digest={"version": 1}),
        BranchSummaryMarker(from_id="e7"),
        ct.markers.ClearedToolResultMarker(),
        InterruptedMarker(),
        InterruptedReplyMarker(),
        CustomMessageMarker(custom_type="note"),
        ForeignMarker(pi_role="bashExecution"),
    ]
    assert {m.kind for m in examples} == set(Kind)
    for m in examples:
        meta = m.to_meta()
        assert meta["kind"] == m.kind.value and None not in meta.values()
        assert marker_of(meta) == m
        message = Message(role="user", content="x", meta=meta)
        assert message.marker == m and message.kind is m.kind


def test_a_marker_keeps_unknown_keys_and_survives_a_bad_field() -> None:
    meta = {"kind": "compaction_summary", "tokens_before": "many", "summary": "S",
            "from_the_future": [1, 2]}
    m = Message(role="system", content="x", meta=meta)
    assert m.marker == CompactionSummaryMarker(summary="S")  # the bad field reads as absent
    assert m.meta == meta  # nothing rewritten
    assert marker_of({"kind": "no_such_kind"}) is None and Message.user("x").marker is None


def test_marked_takes_a_typed_marker_and_keeps_the_rest_of_meta() -> None:
    m = Message.tool("out", tool_call_id="c1", meta={"exit_code": 1, "mine": True})
    cleared = m.marked(ct.markers.ClearedToolResultMarker(), content="[cleared]")
    assert cleared.meta == {"exit_code": 1, "mine": True, "kind": "cleared_tool_result"}
    assert cleared.text == "[cleared]" and cleared.shell == ShellMeta(exit_code=1)
    assert m.marked(Kind.INTERRUPTED).marker == InterruptedMarker()


def test_a_compaction_summary_in_the_context_carries_its_typed_marker(tmp_path: Path) -> None:
    s = Session.create(tmp_path / "s.jsonl")
    first = s.append_message(Message.user("hello"))
    s.append_message(Message.assistant("hi"))
    comp = s.append_compaction(summary="they said hello", first_kept_entry_id=first,
                               tokens_before=1234)
    summary = s.build_context().messages[0]
    mark = summary.marker
    assert isinstance(mark, CompactionSummaryMarker)
    assert (mark.entry_id, mark.tokens_before, mark.summary) == (comp, 1234, "they said hello")
    s.close()


def test_markers_and_tool_facts_on_disk_load_as_written(tmp_path: Path) -> None:
    """What a session file holds is read typed and left byte for byte as it was."""
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("run it"))
        call = ToolCall(id="c1", name="shell", arguments={"command": "false"})
        s.append_message(Message.assistant("", tool_calls=[call]))
        s.append_message(Message.tool("[exit code 1]", tool_call_id="c1", name="shell",
                                      is_error=True,
                                      meta={"command": "false", "exit_code": 1,
                                            "kind": "interrupted", "later_version": {"x": 1}}))
    before = path.read_bytes()
    with Session.open(path, readonly=True) as s:
        tool = s.build_context().messages[-1]
    assert tool.marker == InterruptedMarker()
    assert tool.shell == ShellMeta(command="false", exit_code=1)
    assert tool.meta is not None and tool.meta["later_version"] == {"x": 1}
    assert path.read_bytes() == before
    assert b'"meta":{"command":"false","exit_code":1,"kind":"interrupted","later_version"' in before


@pytest.mark.parametrize("fmt,src", [
    ("pi", DATA / "pi_v3.jsonl"),
    ("pi", DATA / "pi_written_by_pi.jsonl"),
    ("codex", DATA / "real" / "codex" / "compact"),
    ("claude-code", DATA / "real" / "claude_code" / "compact_manual"),
])
def test_fixture_markers_decode_to_exactly_what_the_files_hold(
        tmp_path: Path, fmt: str, src: Path) -> None:
    if src.is_dir():
        src = sorted(p for p in src.rglob("*.jsonl"))[0]
    dest = tmp_path / "imported.jsonl"
    import_session(fmt, src, dest)
    kinds = set()
    with Session.open(dest, readonly=True) as s:
        messages = [e.message for e in s.entries() if isinstance(e, MessageEntry)]
        messages += list(s.build_context().messages)
    for m in messages:
        if m.kind is None:
            assert m.marker is None
            continue
        mark = m.marker
        assert mark is not None and mark.kind is m.kind
        assert m.meta is not None and mark.to_meta().items() <= m.meta.items()
        kinds.add(m.kind)
    assert kinds  # each of these fixtures holds synthetic messages


# -- tool facts -----------------------------------------------------------------------------------


def _tools(tmp_path: Path) -> dict[str, ct.Tool]:
    (tmp_path / "ws").mkdir()
    store = OverflowStore(tmp_path / "overflow")
    return {t.name: t for t in ct.make_tools(workspace=tmp_path / "ws", cwd=tmp_path / "ws",
                                              store=store)}


def test_the_shell_exit_code_is_typed(tmp_path: Path) -> None:
    shell = _tools(tmp_path)["shell"]
    result = shell.run({"command": "echo hi; exit 3"})
    facts = result.shell
    assert facts == ShellMeta(command="echo hi; exit 3", exit_code=3)
    assert type(facts.exit_code) is int and facts.timed_out is False
    assert result.meta == {"command": "echo hi; exit 3", "exit_code": 3}  # as stored before
    assert shell.run({"command": "true"}).shell == ShellMeta(command="true", exit_code=0)
    # a bool is not an exit code; a result without one has no shell facts
    assert ShellMeta.of({"exit_code": True}) is None and ShellMeta.of({"path": "a"}) is None


def test_every_built_in_tool_records_typed_facts(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    wrote = tools["write"].run({"path": "a.txt", "content": "one\ntwo\n"})
    assert WriteMeta.of(wrote.meta) == WriteMeta(path="a.txt", bytes=8, lines=2, created=True)
    edited = tools["edit"].run({"path": "a.txt", "old_string": "two", "new_string": "three"})
    assert EditMeta.of(edited.meta) == EditMeta(path="a.txt", replacements=1, first_line=2)
    read = tools["read"].run({"path": "a.txt"})
    assert ReadMeta.of(read.meta) == ReadMeta(path="a.txt", offset=1, total_lines=2, lines=2)
    assert read.truncation is None and read.shell is None
    listing = tools["read"].run({"path": "."})
    assert ListMeta.of(listing.meta) == ListMeta(path=".", entries=1)
    found = tools["glob"].run({"pattern": "*.txt"})
    assert GlobMeta.of(found.meta) == GlobMeta(pattern="*.txt", path=".", matches=1)
    grep = GrepMeta.of(tools["grep"].run({"pattern": "three"}).meta)
    assert grep is not None and (grep.matches, grep.files, grep.capped) == (1, 1, False)


def test_the_exit_code_reaches_compaction_typed() -> None:
    """The compaction digest reads a failed command's exit code from the typed facts."""
    from contextree.compaction._evidence import exit_code

    m = Message.tool("all fine, nothing to see", tool_call_id="c1",
                     meta=ShellMeta(command="make", exit_code=2).to_meta())
    assert exit_code(m, scan_text=False) == 2


# -- events -----------------------------------------------------------------------------------


def _reader() -> ct.Tool:
    @ct.tool(name="read", kind=ct.ToolKind.READ)
    def read(path: str) -> str:
        """Read a file."""
        return "\n".join(f"{path}:{j}: def handler_{j}(event): return event" for j in range(40))

    return read


def test_the_compacted_payload_is_typed_through_a_real_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTREE_HOME", str(tmp_path / "home"))
    replies: list[ct.models.Reply] = []
    for i in range(6):
        replies.append(Message.assistant(f"Reading {i}.", tool_calls=[
            ToolCall(id=f"r{i}", name="read", arguments={"path": f"src/m{i}.py"})]))
        replies.append(Message.assistant(f"Turn {i} done."))
    path = tmp_path / "s.jsonl"
    agent = (
        ct.agent()
        .use(ct.runtime.SessionTree, path=path)
        .use(ct.runtime.ToolResultLoop)
        .use(ct.runtime.DefaultCompactionPipeline, window=3_000)
        .use(ct.runtime.DefaultToolPipeline, tools=[_reader()])
        .run(ScriptedModel(replies))
    )
    typed: list[CompactedPayload] = []
    by_name: list[Any] = []
    agent.on(CompactedPayload, lambda env, p: typed.append(p))
    agent.on(Event.COMPACTED, lambda env, p: by_name.append(p))
    for i in range(6):
        agent.start(f"step {i}")
    assert typed and by_name == typed
    with Session.open(path, readonly=True) as s:
        ids = {e.id for e in s.entries()}
        compactions = {e.id for e in s.find(CompactionEntry)}
    for p in typed:
        assert type(p) is CompactedPayload and p.event is Event.COMPACTED
        assert p.tokens_before > p.tokens_after and p.reached_target
        assert p.entry_id in compactions
        assert all(isinstance(st, StageReport) for st in p.stages) and p.stages
        for ids_of in (p.cleared, p.dropped, p.summarized):
            assert all(isinstance(i, str) for i in ids_of) and set(ids_of) <= ids
        assert p.cleared or p.dropped
        # still reads as the mapping it was
        assert p["tokens_before"] == p.tokens_before and dict(p)["cleared"] == p.cleared
        assert set(p) == {f.name for f in dataclasses.fields(CompactedPayload)}
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.tokens_after = 0  # type: ignore[misc]


def test_a_payload_compares_with_the_dict_it_used_to_be() -> None:
    p = TurnEndPayload(usage=ct.Usage(), cost=None, iterations=0, stopped=None, error=None)
    assert p == {"event": "turn_end", "usage": ct.Usage(), "cost": None, "iterations": 0,
                 "stopped": None, "error": None}
    assert isinstance(p, EventPayload) and "cost" in p and "nope" not in p
    with pytest.raises(KeyError):
        p["nope"]


def test_on_refuses_a_class_that_is_not_a_payload() -> None:
    with pytest.raises(InvalidArgument, match="dict is not an event payload class"):
        ct.agent().on(dict, lambda env, p: None)  # type: ignore[call-overload]


# -- stop reasons -----------------------------------------------------------------------------


def test_stop_reasons_are_one_enum() -> None:
    assert {r.value for r in StopReason} == {
        "max_iterations", "doom_loop", "budget", "interrupted", "nothing_to_answer", "error",
        "middleware"}
    with pytest.raises(InvalidArgument, match="unknown stop reason 'tired'"):
        Env().stop("tired", "no")  # type: ignore[arg-type]


def test_a_stopped_turn_reports_a_stop_reason_member(tmp_path: Path) -> None:
    call = ToolCall(id="c1", name="read", arguments={"path": "x"})
    model = ScriptedModel([Message.assistant("", tool_calls=[call])] * 3)
    ends: list[TurnEndPayload] = []
    agent = (ct.agent().use(ct.runtime.ToolResultLoop).use(MaxIterations, limit=1)
             .use(ct.runtime.DefaultToolPipeline, tools=[_reader()]).run(model))
    agent.on(TurnEndPayload, lambda env, p: ends.append(p))
    turn = agent.start("go")
    assert turn.stopped is StopReason.MAX_ITERATIONS and turn.stopped == "max_iterations"
    assert [e.stopped for e in ends] == [StopReason.MAX_ITERATIONS]
    done = ct.agent().run(ScriptedModel(["fine"])).start("hi")
    assert done.stopped is None


# -- no Any where a real type exists ----------------------------------------------------------

EDGE_MODULES = [
    "contextree.formats._claude_code_export",
    "contextree.formats._codex_export",
    "contextree.formats._brute",
    "contextree.formats._pi.writer",
    "contextree.formats",
    "contextree.integrations.pydantic_ai._history",
    "contextree.integrations.pydantic_ai._store",
    "contextree.integrations.openai_agents",
    "contextree.integrations.langchain",
]
TYPED_PARAMS = {"session", "model", "summarizer", "summariser"}


def _public_callables(module: Any) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, obj in vars(module).items():
        # Defined here: its __module__ is this module, or the public path it is published under.
        where = getattr(obj, "__module__", None)
        if name.startswith("_") or not (where == module.__name__ or (
                isinstance(where, str) and module.__name__.startswith(where + "._"))):
            continue
        if inspect.isfunction(obj):
            out.append((name, obj))
        elif inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                value = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                if inspect.isfunction(value):
                    out.append((f"{name}.{attr}", value))
    return out


@pytest.mark.parametrize("module_name", EDGE_MODULES)
def test_no_any_for_sessions_and_models_at_the_edges(module_name: str) -> None:
    module = importlib.import_module(module_name)
    callables = _public_callables(module)
    assert callables
    bad = []
    for qual, fn in callables:
        for p in inspect.signature(fn).parameters.values():
            if p.name not in TYPED_PARAMS:
                continue
            note = p.annotation
            if note is inspect.Parameter.empty or re.search(r"\bAny\b", str(note)):
                bad.append(f"{qual}({p.name}: {note})")
    assert not bad, f"{module_name}: untyped session/model parameters: {bad}"


def test_the_exporters_take_a_session() -> None:
    for name in EDGE_MODULES[:4]:
        module = importlib.import_module(name)
        write = module.write
        assert "Session" in str(inspect.signature(write).parameters["session"].annotation)
