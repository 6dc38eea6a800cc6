"""The offline rungs of the ladder: clear old tool results, drop the oldest turns, digest
what a cut removes."""

from __future__ import annotations

from dataclasses import replace

import orjson

from .._messages import Message, ToolCall
from .._text import shorten
from .._truncation import LIMITS
from ._cuts import choose_cut, summary_cut
from ._digest import DEFAULT_MAX_CHARS, digest_messages
from ._evidence import SHELL_TOOLS, WRITE_TOOLS, error_excerpt, exit_code
from ._state import CompactionState, Plan, with_summary

__all__ = ["Digest", "SlidingWindow", "ToolResults", "placeholder"]


class ToolResults:
    """Replace old tool results (oldest first) by a placeholder saying how to get them back.

    The results of the newest ``keep_recent`` tool-calling steps are never cleared.
    """

    name = "tool_results"

    def __init__(self, keep_recent: int = 3) -> None:
        if keep_recent < 0:
            raise ValueError("keep_recent must be >= 0")
        self.keep_recent = keep_recent

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        ctx = state.render(plan)
        messages, ids = ctx.messages, ctx.entry_ids
        calls: dict[str, ToolCall] = {}
        steps: list[int] = []
        for i, m in enumerate(messages):
            if m.role == "assistant" and m.tool_calls:
                steps.append(i)
                for c in m.tool_calls:
                    calls[c.id] = c
        protected_from = steps[-self.keep_recent] if 0 < self.keep_recent <= len(steps) else (
            0 if self.keep_recent else len(messages))
        total = state.tokens(plan)
        target = state.policy.target
        cleared = dict(plan.cleared)
        sizes = state.sizes(messages)
        for i, m in enumerate(messages[:protected_from]):
            eid = ids[i]
            if m.role != "tool" or eid is None or eid in cleared or m.kind is not None:
                continue
            call = calls.get(m.tool_call_id or "")
            text = placeholder(m, call)
            # (the same text and name as the placeholder will have: its count is cached)
            after = state.sizes((Message.tool(text, tool_call_id="x", name=m.name),))[0]
            saving = round((sizes[i] - after) * state.scale)
            if saving <= 0:
                continue
            cleared[eid] = text
            total -= saving
            if total <= target:
                break
        if len(cleared) == len(plan.cleared):
            return None
        return replace(plan, cleared=cleared)


def placeholder(result: Message, call: ToolCall | None) -> str:
    """What the model sees instead of a cleared tool result: what it was and how to get it."""
    name = call.name if call else (result.name or "tool")
    args = ""
    if call is not None:
        args = shorten(orjson.dumps(call.arguments).decode(), 201)
    text = result.text
    size = f"{text.count(chr(10)) + 1} lines, {len(text.encode())} bytes"
    if call is not None and call.name in WRITE_TOOLS:
        path = next((v for k in ("path", "file_path", "filename", "file")
                     if isinstance(v := call.arguments.get(k), str)), None)
        how = ("It changed files: do not run it again; read "
               + (f"{path}" if path else "the file") + " to see its current content.")
    elif call is not None and call.name in SHELL_TOOLS:
        how = "Run the command again if you need its output and it is safe to repeat."
    else:
        how = "Run the tool again with the same arguments if you need it."
    truncation = result.truncation
    if truncation is not None and truncation.saved_path:
        saved = truncation.saved_path
        how = (f"The full output is saved at {saved}; read it with "
               f"read(path={orjson.dumps(saved).decode()}, offset=1, limit={LIMITS.max_lines}).")
    code = exit_code(result, scan_text=call is None or call.name in SHELL_TOOLS)
    error = ""
    if result.is_error or (code is not None and code != 0):
        excerpt = error_excerpt(text, 300)
        status = f"exit code {code}" if code is not None else "an error"
        error = f" It ended with {status}: {excerpt}." if excerpt else f" It ended with {status}."
    return f"[Cleared to save context: result of {name}({args}), {size}.{error} {how}]"


class SlidingWindow:
    """Drop the oldest whole turns, leaving a note that says how much was dropped.

    By default only whole turns before the current task go: when the current turn alone is
    over the target, the ladder goes on to a stage that summarizes its older steps (so a
    long autonomous run does not silently forget what it did). With ``within_turn=True`` the
    oldest steps of the current turn are dropped too (never the task, never the last step).
    """

    name = "sliding_window"

    def __init__(self, *, within_turn: bool = False) -> None:
        self.within_turn = within_turn

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        note_reserve = 40
        cut = choose_cut(state, plan, state.policy.target, reserve=note_reserve,
                         steps=self.within_turn)
        if cut is None or cut.first_kept <= plan.first_kept or not cut.dropped_ids:
            return None
        note = (f"[{len(cut.dropped_ids)} earlier messages (about {cut.dropped_tokens} tokens) "
                "were dropped from the context to fit the window; the full history is kept in "
                "the session file.]")
        summary = f"{plan.summary}\n\n{note}" if plan.summary else note
        return replace(plan, summary=summary, first_kept=cut.first_kept,
                       pinned=tuple(dict.fromkeys([*plan.pinned, *cut.pins])))


class Digest:
    """Summarize everything before a cut with ``digest_messages``; keep recent steps whole.

    The cut keeps about ``keep_ratio`` of the target of recent messages; the digest gets the
    room left under the target (between ``min_chars`` and ``max_chars`` characters).
    """

    name = "digest"

    def __init__(self, keep_ratio: float = 0.5, *, min_chars: int = 2_000,
                 max_chars: int = DEFAULT_MAX_CHARS) -> None:
        if not 0 < keep_ratio <= 1:
            raise ValueError(f"keep_ratio must be in (0, 1], got {keep_ratio!r}")
        if not 0 < min_chars <= max_chars:
            raise ValueError(f"need 0 < min_chars <= max_chars, got {min_chars}, {max_chars}")
        self.keep_ratio = keep_ratio
        self.min_chars = min_chars
        self.max_chars = max_chars

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        found = summary_cut(state, plan, self.keep_ratio)
        if found is None:
            return None
        new, items = found
        ids = [eid for _, eid in items if eid]
        # The room under the target, in characters: start from a conservative guess of the
        # characters a token, then shrink if the rendered digest still overruns.
        room = state.policy.target - state.bare_tokens(new)
        chars = max(self.min_chars, min(self.max_chars, room * 3))
        previous = state.initial_plan.summary
        for _ in range(4):
            summary = digest_messages(previous, items, max_chars=chars)
            candidate = with_summary(new, summary, ids)
            over = state.tokens_with_summary(candidate) - state.policy.target
            if over <= 0 or chars <= self.min_chars:
                return candidate
            used = state.count(Message.system(summary)) or 1
            chars = max(self.min_chars, int(chars * (used - over) / used * 0.95))
        return candidate
