"""The offline rungs of the ladder: clear old tool results, drop the oldest turns (folding
them into the summary), digest what a cut removes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import orjson

from .._messages import Message, ToolCall
from .._text import shorten
from .._truncation import LIMITS, read_call
from ..tools._kinds import ToolKind
from ._evidence import CallIndex, changed_paths, error_excerpt, exit_code, kind_of, output_text
from ._fold import LOW, fold
from ._state import CompactionState, Plan

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
        steps = [i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls]
        protected_from = steps[-self.keep_recent] if 0 < self.keep_recent <= len(steps) else (
            0 if self.keep_recent else len(messages))
        total = state.tokens(plan)
        target = state.policy.target
        cleared = dict(plan.cleared)
        sizes = state.sizes(messages)
        savings: dict[str, int] = {}  # results cleared here, oldest first
        index = CallIndex()  # a result answers the nearest preceding call with its id
        # No placeholder is smaller than its fixed words: a result that is not larger
        # cannot save anything, and is passed over without writing its placeholder.
        floor = state.sizes((Message.tool(_FLOOR, tool_call_id="x"),))[0]
        names: dict[str, int] = {}
        for i, m in enumerate(messages[:protected_from]):
            call = index.see(m)
            eid = ids[i]
            if m.role != "tool" or eid is None or eid in cleared or m.kind is not None:
                continue
            if m.name and m.name not in names:
                names[m.name] = state.counter.count_text(m.name)
            if sizes[i] <= floor + names.get(m.name or "", 0):
                continue
            text = placeholder(m, call, state.fold.tool_kinds)
            # (the same text and name as the placeholder will have: its count is cached)
            after = state.sizes((Message.tool(text, tool_call_id="x", name=m.name),))[0]
            saving = round((sizes[i] - after) * state.scale)
            if saving <= 0:
                continue
            cleared[eid] = text
            savings[eid] = saving
            total -= saving
            if total <= target:
                break
        if len(cleared) == len(plan.cleared):
            return None
        if total < LOW * target:
            # The last result cleared was a big one: give back the newest of the others
            # that still fit, so the context lands near the target instead of far under it.
            for eid in reversed(list(savings)):
                if total + savings[eid] <= target:
                    total += savings.pop(eid)
                    del cleared[eid]
        return replace(plan, cleared=cleared)


# What every placeholder holds whatever the tool (see ``placeholder``), at its shortest.
_FLOOR = "[Cleared to save context: result of (), 1 lines, 0 bytes. ]"


def placeholder(result: Message, call: ToolCall | None,
                kinds: Mapping[str, ToolKind] | None = None) -> str:
    """What the model sees instead of a cleared tool result: what it was and how to get it.

    The tool's kind (declared in ``kinds``, else known from its name, case-insensitive)
    decides the advice: a file change is not to be repeated, a command may be re-run.
    """
    name = call.name if call else (result.name or "tool")
    kind = kind_of(name, kinds)
    args = ""
    if call is not None:
        args = shorten(orjson.dumps(call.arguments).decode(), 201)
    text = result.text
    nbytes = len(text) if text.isascii() else len(text.encode())  # (no copy of ASCII text)
    size = f"{text.count(chr(10)) + 1} lines, {nbytes} bytes"
    if call is not None and kind in (ToolKind.EDIT, ToolKind.WRITE):
        paths = changed_paths(call)
        how = ("It changed files: do not run it again; read "
               + (", ".join(paths) if paths else "the file") + " to see its current content.")
    elif kind is ToolKind.SHELL:
        how = "Run the command again if you need its output and it is safe to repeat."
    else:
        how = "Run the tool again with the same arguments if you need it."
    truncation = result.truncation
    if truncation is not None and truncation.saved_path:
        saved = truncation.saved_path
        how = (f"The full output is saved at {saved}; read it with "
               f"{read_call(saved, 1, LIMITS.max_lines)}.")
    code = exit_code(result, scan_text=call is None or kind is ToolKind.SHELL)
    error = ""
    if result.is_error or (code is not None and code != 0):
        excerpt = error_excerpt(output_text(result), 300)
        status = f"exit code {code}" if code is not None else "an error"
        error = f" It ended with {status}: {excerpt}." if excerpt else f" It ended with {status}."
    return f"[Cleared to save context: result of {name}({args}), {size}.{error} {how}]"


class SlidingWindow:
    """Drop the oldest whole turns, folding them into the summary.

    The cut is the cheapest that fits: the fewest turns that bring the context, with room
    reserved for the summary of what they said, under the target. What goes is folded
    (``fold``): the user's messages verbatim, errors, files, identifiers... by the
    summarizer when the ladder has one and this plan reaches the target, else by the
    offline digest. By default only whole turns before the current task go: when the
    current turn alone is over the target, the ladder goes on to a stage that summarizes
    its older steps. With ``within_turn=True`` the oldest steps of the current turn may go
    too (never the task, never the last step).
    """

    name = "sliding_window"

    def __init__(self, *, within_turn: bool = False) -> None:
        self.within_turn = within_turn

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        return fold(state, plan, steps=self.within_turn, summarizer=state.fold.summarizer)


class Digest:
    """Fold everything before a cut into the offline digest; keep recent steps whole.

    The cut may fall between steps of the current turn. The kept messages get at most
    ``keep_ratio`` of the target (less when the digest needs the room, more when the
    digest has said everything in less); the digest gets the rest of the room under the
    target, which it fills with detail.
    """

    name = "digest"

    def __init__(self, keep_ratio: float = 0.5) -> None:
        if not 0 < keep_ratio <= 1:
            raise ValueError(f"keep_ratio must be in (0, 1], got {keep_ratio!r}")
        self.keep_ratio = keep_ratio

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        return fold(state, plan, steps=True, keep_ratio=self.keep_ratio)
