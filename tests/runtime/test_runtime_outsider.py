"""What a developer meets on a first careless day with the runtime: a provider that sends a
lone surrogate, tool hooks and approvals, several turns on one session at once."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import contextree as ct
from contextree import Message, Session, ToolCall
from contextree.errors import InvalidArgument
from contextree.models import OpenAIChat, ScriptedModel
from contextree.runtime import DefaultToolPipeline, SessionTree, ToolResultLoop
from fakes import SSE, Recorded, Reply
from fakes.openai_server import OpenAIServer, completion


def _with_lone_surrogate(server: OpenAIServer, text: str):  # type: ignore[no-untyped-def]
    """A completion whose content holds ``\\ud800`` escaped in the JSON, as some servers
    send a cut emoji: valid JSON, decoded by the SDK into a lone surrogate (streamed or
    not, as the request asks)."""
    body = completion(text + " XX")
    server.chunk = 1000  # the text in one piece, so " XX" is in one event

    def answer(req: Recorded) -> Reply | SSE:
        if req.body.get("stream"):
            return SSE([(None, json.dumps(c).replace(" XX", " \\ud800"))
                        for c in server.chunks(body, req)] + [(None, "[DONE]")])
        return Reply(200, raw=json.dumps(body).replace(" XX", " \\ud800").encode())

    return answer


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_with_a_lone_surrogate_is_kept_not_lost(oa: OpenAIServer, tmp_path: Path,
                                                        stream: bool) -> None:
    oa.reply(_with_lone_surrogate(oa, "half an emoji:"))
    model = OpenAIChat("gpt-test", base_url=oa.base_url, api_key="k")
    agent = ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").run(model, stream=stream)
    turn = agent.start("hi")
    assert turn.text == "half an emoji: \ufffd"
    with Session.open(tmp_path / "s.jsonl", readonly=True) as s:
        assert [m.text for m in s.build_context().messages] == ["hi", "half an emoji: \ufffd"]


@ct.tool
def run(command: str) -> str:
    """Pretend to run a command.

    Args:
        command: The command line.
    """
    return f"ran {command}"


def _tool_turn(tmp_path: Path, calls: list[ToolCall], **hooks: object) -> list[str]:
    model = ScriptedModel([Message.assistant("", tool_calls=calls), "done"])
    agent = (ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").use(ToolResultLoop)
             .use(DefaultToolPipeline, tools=[run], concurrency=1, **hooks).run(model))
    turn = agent.start("go")
    return [m.text for m in turn.messages if m.role == "tool"]


def test_the_approval_hook_sees_the_arguments_that_run_after_tool_start_rewrote_them(
        tmp_path: Path) -> None:
    seen: list[dict[str, object]] = []

    def start(call: ToolCall, env: object) -> object:
        return {"command": "rm -rf build"}  # e.g. a hook that expands an alias

    def approve(call: ToolCall, env: object) -> bool:
        seen.append(dict(call.arguments))
        return True

    results = _tool_turn(tmp_path, [ToolCall(id="c1", name="run",
                                             arguments={"command": "make clean"})],
                         tool_start=start, tool_approve=approve)
    assert results == ["ran rm -rf build"]
    assert seen == [{"command": "rm -rf build"}]  # what was approved is what ran


def test_a_call_that_cannot_run_is_refused_before_anyone_is_asked(tmp_path: Path) -> None:
    asked: list[ToolCall] = []

    def approve(call: ToolCall, env: object) -> bool:
        asked.append(call)
        return True

    results = _tool_turn(tmp_path, [
        ToolCall(id="c1", name="run", arguments={"_raw": "{not json"}),
        ToolCall(id="c2", name="run", arguments={"command": ["rm", "-rf"]}),
        ToolCall(id="c3", name="run", arguments={"command": "ls"})], tool_approve=approve)
    assert results[0].startswith("invalid arguments for tool 'run'")
    assert results[1].startswith("invalid arguments for tool 'run'")
    assert results[2] == "ran ls"
    assert [c.id for c in asked] == ["c3"]


def _answers_follow_questions(path: Path, n: int) -> None:
    with Session.open(path, readonly=True) as s:
        messages = s.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant"] * n
    for question, answer in zip(messages[::2], messages[1::2], strict=True):
        assert answer.text == "answer to " + question.text  # each reply after its question


class Echo(ScriptedModel):
    """Answers the last user message, slowly enough for turns to overlap."""

    def complete(self, messages, tools=None, **options):  # type: ignore[no-untyped-def]
        import time

        time.sleep(0.01)
        last = next(m for m in reversed(messages) if m.role == "user")
        return Message.assistant("answer to " + last.text)

    def stream(self, messages, tools=None, **options):  # type: ignore[no-untyped-def]
        raise NotImplementedError


@pytest.mark.parametrize("shared", [True, False])
def test_turns_started_at_once_on_one_session_take_turns(tmp_path: Path,
                                                         shared: bool) -> None:
    """Threads of a web app answering the same conversation (one agent on one Session, or
    an agent per request on the same file): each turn sees the ones before it whole, so no
    question is answered by another's reply and no two user messages stack up."""
    path = tmp_path / "s.jsonl"
    session = Session.create(path)
    shared_agent = ct.agent().use(SessionTree, session=session).run(Echo([]), stream=False)

    def ask(i: int) -> None:
        agent = shared_agent if shared else (
            ct.agent().use(SessionTree, path=path).run(Echo([]), stream=False))
        agent.start(f"q{i}")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    session.close()
    _answers_follow_questions(path, 8)


def _held_echo() -> tuple[threading.Event, threading.Event, type[Echo]]:
    """An ``Echo`` model whose calls hold until ``release`` is set, and the event it sets
    once a call has started (``calling``): a turn that keeps its session busy."""
    calling, release = threading.Event(), threading.Event()

    class Slow(Echo):
        def complete(self, messages, tools=None, **options):  # type: ignore[no-untyped-def]
            calling.set()
            release.wait(30)
            return super().complete(messages, tools, **options)

    return calling, release, Slow


def test_a_turn_waiting_for_another_on_its_session_can_be_interrupted(tmp_path: Path) -> None:
    calling, release, Slow = _held_echo()

    path = tmp_path / "s.jsonl"
    first = ct.agent().use(SessionTree, path=path).run(Slow([]), stream=False)
    second = ct.agent().use(SessionTree, path=path).run(Echo([]), stream=False)
    running = threading.Thread(target=first.start, args=("q0",))
    running.start()
    assert calling.wait(30)  # the first turn holds the session
    waiting = second.stream("never asked")
    assert next(waiting)["event"] == "turn_start"  # now waiting for the first turn
    waiting.close()  # returns although the first turn still runs
    assert running.is_alive()
    release.set()
    running.join()
    _answers_follow_questions(path, 1)  # the interrupted turn wrote nothing


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_child_forked_mid_turn_is_told_the_session_is_its_parents(tmp_path: Path) -> None:
    """``os.fork()`` while a turn runs in another thread: the child's turn on that session
    gets ``SessionLocked`` at once instead of waiting for a turn that never ends there."""
    import os

    calling, release, Slow = _held_echo()

    session = Session.create(tmp_path / "s.jsonl")
    agent = ct.agent().use(SessionTree, session=session).run(Slow([]), stream=False)
    running = threading.Thread(target=agent.start, args=("q0",))
    running.start()
    assert calling.wait(30)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what its turn met, within a bound
        os.close(read)
        import signal

        signal.alarm(20)
        try:
            agent.start("from the child")
            said = b"no error"
        except ct.errors.SessionLocked:
            said = b"SessionLocked"
        except BaseException as e:  # reported to the parent
            said = type(e).__name__.encode()
        os.write(write, said)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as r:
        said = r.read()
    os.waitpid(pid, 0)
    release.set()
    running.join()
    session.close()
    assert said == b"SessionLocked"


def test_a_tool_that_exits_is_an_error_the_model_reads_not_an_interruption(
        tmp_path: Path) -> None:
    """A tool wrapping a command line's main() (argparse on bad arguments, ``sys.exit``)
    raises ``SystemExit``: the model is told the tool exited, and the turn goes on."""
    import argparse

    @ct.tool
    def count(args: str) -> str:
        """Count.

        Args:
            args: The command line.
        """
        parser = argparse.ArgumentParser(prog="count")
        parser.add_argument("--n", type=int, required=True)
        return str(parser.parse_args(args.split()).n)

    model = ScriptedModel([Message.assistant("", tool_calls=[
        ToolCall(id="c1", name="count", arguments={"args": "--wrong"})]), "done"])
    agent = (ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").use(ToolResultLoop)
             .use(DefaultToolPipeline, tools=[count]).run(model))
    turn = agent.start("go")
    assert turn.stopped is None and turn.text == "done"
    (result,) = [m for m in turn.messages if m.role == "tool"]
    assert result.is_error and result.text == "tool 'count' exited (SystemExit: 2)"


def test_a_stream_dropped_mid_turn_interrupts_its_turn(tmp_path: Path) -> None:
    """``for event in agent.stream(q): ... break`` without a ``with`` block, then the next
    question: the dropped turn is interrupted (its partial reply kept), as leaving a
    ``with`` block does, instead of running on and holding the session."""
    from fakes.models import HeldModel

    model = HeldModel(["reply one, cut short", "second"], chunk=4, hold_after=2)  # 5, 2 pieces
    agent = ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").run(model)
    for event in agent.stream("first question"):
        if event["event"] == "text_delta":
            break  # the stream is dropped here
    assert agent.start("second question").text == "second"
    assert not model.release.is_set()  # the first reply never went on
    with Session.open(tmp_path / "s.jsonl", readonly=True) as s:
        messages = s.build_context().messages
    assert messages[0].text == "first question"
    assert messages[1].kind == ct.markers.Kind.INTERRUPTED_REPLY
    assert [m.text for m in messages][2:] == ["second question", "second"]


def test_the_careless_first_try_gets_errors_that_say_what_to_do(tmp_path: Path) -> None:
    """The mistakes of a first try are ``InvalidArgument`` saying what was meant, not an
    ``AttributeError`` or ``TypeError`` from deep inside."""
    with pytest.raises(InvalidArgument, match=r"a model object.*OpenAIChat\('gpt-4o-mini'\)"):
        ct.agent().run("gpt-4o-mini")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=r"got the string 'shell'.*make_tools"):
        ct.agent().use(DefaultToolPipeline, tools=["shell"])
    with pytest.raises(InvalidArgument, match=r"MaxIterations: limit must be a whole number"):
        ct.agent().use(ct.runtime.MaxIterations, limit="5")
    with pytest.raises(InvalidArgument, match=r"DoomLoop: threshold must be a whole number"):
        ct.agent().use(ct.runtime.DoomLoop, threshold=2.5)
    agent = ct.agent().run(ScriptedModel(["hi"]))
    for wrong in (123, ["hello"]):
        with pytest.raises(InvalidArgument, match=r"a str or a Message"):
            agent.start(wrong)  # type: ignore[arg-type]
    assert agent.start("hello").text == "hi"  # nothing was used up by the mistakes


@pytest.mark.parametrize("slip", ["twice", "inside the loop"])
def test_session_tree_in_the_wrong_place_says_where_it_goes(tmp_path: Path,
                                                           slip: str) -> None:
    """``SessionTree`` twice on one path (a copy-paste slip) hung the turn, then wrote every
    message twice; inside ``ToolResultLoop`` it wrote to a session it had closed. Both are
    an error that says where it goes."""
    path = tmp_path / "s.jsonl"
    call = ToolCall(id="c1", name="run", arguments={"command": "ls"})
    model = ScriptedModel([Message.assistant("", tool_calls=[call]), "done"])
    builder = ct.agent()
    if slip == "twice":
        builder = builder.use(SessionTree, path=path).use(SessionTree, path=path)
    else:
        builder = builder.use(ToolResultLoop).use(SessionTree, path=path)
    agent = builder.use(DefaultToolPipeline, tools=[run]).run(model)
    failed: list[BaseException] = []

    def turn() -> None:
        try:
            agent.start("hello")
        except InvalidArgument as e:
            failed.append(e)

    worker = threading.Thread(target=turn, daemon=True)
    worker.start()
    worker.join(60)
    assert len(failed) == 1 and "outermost" in str(failed[0])
