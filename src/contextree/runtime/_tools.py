"""``DefaultToolPipeline``: advertise tools, run the calls a reply asks for, add the results."""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._context import interrupted_result
from .._messages import Message, ToolCall
from .._overflow import OverflowStore
from .._truncation import LIMITS, TruncationLimits, is_truncated, truncate
from ..errors import InvalidArgument, ToolError
from ..tools import ALL, Tool, ToolContext, ToolResult, as_tools
from ._builder import App
from ._call import interrupt_turn
from ._env import Env
from ._events import Event, ToolEndPayload, ToolStartPayload, TruncatedPayload

_WAKE = object()

StartHook = Callable[[ToolCall, Env], "dict[str, Any] | ToolResult | str | None"]
ApproveHook = Callable[[ToolCall, Env], "bool | str"]
EndHook = Callable[[ToolCall, ToolResult, Env], "ToolResult | None"]


class _Turns:
    """Approvals one at a time, in call order: the answer a person types goes to the
    question shown just before it, and the questions come in the order of the calls.
    A call takes its turn before it asks and passes it on when answered (or when it ends
    without asking: an unknown tool, arguments that cannot run)."""

    def __init__(self, give_up: Callable[[], bool]) -> None:
        self._give_up = give_up
        self._next = 0
        self._passed: set[int] = set()
        self._changed = threading.Condition()

    def take(self, i: int) -> bool:
        """Wait for call ``i``'s turn; False if the turn of the agent is interrupted first."""
        with self._changed:
            while self._next != i:
                if self._give_up():
                    return False
                self._changed.wait(0.05)
        return True

    def pass_on(self, i: int) -> None:
        """Call ``i`` is answered (or will not ask): the next call's turn, once it is due."""
        with self._changed:
            self._passed.add(i)
            while self._next in self._passed:
                self._next += 1
            self._changed.notify_all()

    def of(self, i: int) -> _Turn:
        return _Turn(self, i)


@dataclasses.dataclass(frozen=True)
class _Turn:
    """Call ``i``'s turn to be approved (``_Turns``)."""

    turns: _Turns
    i: int

    def take(self) -> bool:
        return self.turns.take(self.i)

    def pass_on(self) -> None:
        self.turns.pass_on(self.i)


class DefaultToolPipeline:
    """Runs tool calls after the model replies, ``concurrency`` at a time, results in call
    order. Nothing a tool does can crash the turn: an unknown tool, invalid arguments or an
    exception become an error result the model can read. Every result is truncated to
    ``limits``, keeping the end the tool asks for (``Tool.truncate_from``: the tail for a
    shell-kind tool, else the head), unless the tool truncated it itself.

    Hooks: ``tool_start(call, env)`` may return new arguments or an answer (then the tool is
    not run); ``tool_approve(call, env)`` may return ``False`` or a reason to deny it;
    ``tool_end(call, result, env)`` may return a replacement result. ``tool_approve`` is
    asked only about a call that can run (its arguments valid), and sees the arguments that
    will run (``tool_start``'s, when it gave new ones); it is asked about one call at a time,
    in call order (a person's answer goes to the question shown), while the approved calls
    run.

    Interruption (``Env.interrupt``): the calls that have not returned get an "interrupted"
    result at once and the turn stops; a tool still running is left to finish on its own
    (its result is dropped), so Ctrl-C never waits for a long command.
    """

    def __init__(self, app: App, /, tools: Sequence[Tool | Callable[..., Any]] = ALL, *,
                 concurrency: int = 4, context: ToolContext | None = None,
                 store: OverflowStore | None = None, tool_start: StartHook | None = None,
                 tool_approve: ApproveHook | None = None, tool_end: EndHook | None = None,
                 limits: TruncationLimits = LIMITS) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidArgument("DefaultToolPipeline: concurrency must be a whole number of "
                                  f"at least 1 (tool calls run at once), got {concurrency!r}")
        self.app = app
        self.tools = as_tools(tools)
        self.by_name = {t.name: t for t in self.tools}
        self.concurrency = concurrency
        self.context = context
        self.store = store
        self.tool_start, self.tool_approve, self.tool_end = tool_start, tool_approve, tool_end
        self.limits = limits

    def __call__(self, env: Env) -> Env:
        env.offer_tools(self.tools)
        env = self.app(env)
        reply = env.last
        if env.stopped or reply is None or reply.role != "assistant" or not reply.tool_calls:
            return env
        calls = reply.tool_calls
        results = self._run_all(calls, env)
        interrupted = []
        for call, result in zip(calls, results, strict=True):
            if result is None:
                env.add(interrupted_result(call.id, call.name))
                interrupted.append(call.id)
            else:
                env.add(Message.tool(result.content, tool_call_id=call.id, name=call.name,
                                     is_error=result.is_error, meta=result.meta))
        if interrupted:
            interrupt_turn(env, None, calls=interrupted)
        return env

    def _run_all(self, calls: Sequence[ToolCall], env: Env) -> list[ToolResult | None]:
        """Each call's result, in call order, ``concurrency`` at a time, each in a thread
        of its own so an interruption need not wait; None for the calls that had not
        returned when the turn was interrupted."""
        results: list[ToolResult | None] = [None] * len(calls)
        done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        abandoned = threading.Event()
        turns = _Turns(lambda: env.cancelled)

        def work(i: int) -> None:
            try:
                results[i] = self._run(calls[i], env, abandoned, turns.of(i))
            finally:
                turns.pass_on(i)
                done.put(i)

        forget = env.on_interrupt(lambda: done.put(_WAKE))
        try:
            waiting = list(range(len(calls)))[::-1]
            running = 0
            finished = 0
            while finished < len(calls):
                while waiting and running < self.concurrency and not env.cancelled:
                    threading.Thread(target=work, args=(waiting.pop(),), daemon=True,
                                     name="contextree-tool").start()
                    running += 1
                if env.cancelled:
                    abandoned.set()
                    break
                if done.get() is not _WAKE:
                    running -= 1
                    finished += 1
        finally:
            forget()
        return results

    def _context(self, env: Env) -> ToolContext:
        ctx = self.context or ToolContext()
        if ctx.session_id is None and env.session is not None:
            ctx = dataclasses.replace(ctx, store=ctx.store or self.store,
                                      session_id=env.session.id)
        return ctx

    def _context_for(self, tool: Tool, env: Env) -> ToolContext | None:
        """The context a tool runs in: its own (``make_tools``), told which session it
        works for when it was made without one, so that what it spills is kept in that
        session's folder of the store (and ``rm`` of the session can tell it is its own);
        else the pipeline's."""
        if tool.context is None:
            return self._context(env)
        if tool.context.session_id is None and env.session is not None:
            return dataclasses.replace(tool.context, session_id=env.session.id)
        return None

    def _run(self, call: ToolCall, env: Env, abandoned: threading.Event,
             turn: _Turn) -> ToolResult:
        env.emit(ToolStartPayload(event=Event.TOOL_START, call=call))
        try:
            result = self._execute(call, env, turn)
        except Exception as e:  # the turn goes on; the model reads what went wrong
            result = ToolResult(f"tool {call.name!r} raised {type(e).__name__}: {e}",
                                is_error=True)
        except BaseException as e:  # sys.exit(), argparse on bad arguments: in this thread
            # it would end nothing but the thread, and the call would look interrupted
            result = ToolResult(f"tool {call.name!r} exited ({type(e).__name__}"
                                + (f": {e}" if str(e) else "") + ")", is_error=True)
        if self.tool_end is not None:
            try:
                result = self.tool_end(call, result, env) or result
            except Exception as e:
                result = ToolResult(f"tool_end hook raised {type(e).__name__}: {e}", is_error=True)
        if not abandoned.is_set():
            env.emit(ToolEndPayload(event=Event.TOOL_END, call=call, result=result))
        return result

    def _execute(self, call: ToolCall, env: Env, turn: _Turn) -> ToolResult:
        tool = self.by_name.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self.by_name)) or "none"
            return ToolResult(f"unknown tool {call.name!r}; the available tools are: {known}",
                              is_error=True)
        arguments: dict[str, Any] = dict(call.arguments)
        if self.tool_start is not None:
            answer = self.tool_start(call, env)
            if isinstance(answer, ToolResult):
                return answer
            if isinstance(answer, str):
                return ToolResult(answer)
            if isinstance(answer, dict):
                arguments = answer
        if self.tool_approve is not None:
            try:  # a call that cannot run is refused before anyone is asked about it
                tool.validate(arguments)
            except ToolError as e:
                return ToolResult(str(e), is_error=True)
            asked = call if arguments == call.arguments else call.replace(arguments=arguments)
            if not turn.take():
                return ToolResult("the turn was interrupted before it was approved",
                                  is_error=True)
            try:
                verdict = self.tool_approve(asked, env)  # what is approved is what runs
            finally:
                turn.pass_on()  # the next call asks while this one runs
            if verdict is not True:
                reason = verdict if isinstance(verdict, str) else "the user did not approve it"
                return ToolResult(f"tool call {call.name!r} was denied: {reason}", is_error=True)
        result = tool.run(arguments, context=self._context_for(tool, env))
        if tool.truncates_itself or is_truncated(result.meta):
            record = result.truncation
            if record is not None:
                env.emit(TruncatedPayload(event=Event.TRUNCATED, call=call,
                                          saved_path=record.saved_path,
                                          total_bytes=record.total_bytes,
                                          total_lines=record.total_lines))
            return result
        caps = self.limits
        cut = truncate(result.content, direction=tool.truncate_from or "head",
                       store=self.store or self._context(env).store,
                       session_id=env.session.id if env.session is not None else None,
                       label=call.name, max_lines=caps.max_lines, max_bytes=caps.max_bytes,
                       max_line_chars=caps.max_line_chars)
        if not cut.truncated:
            return result
        env.emit(TruncatedPayload(event=Event.TRUNCATED, call=call, saved_path=cut.saved_path,
                                  total_bytes=cut.total_bytes, total_lines=cut.total_lines))
        return ToolResult(cut.text, is_error=result.is_error, meta={**(result.meta or {}),
                                                                   **cut.meta()})
