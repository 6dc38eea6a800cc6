"""The free rungs of the ladder: clear old tool results, then drop the oldest turns."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import orjson

from ..messages import Message, ToolCall
from ..truncation import is_truncated
from .pipeline import CompactionState, Plan

READ_TOOLS = frozenset({"read", "grep", "glob", "view", "cat", "ls", "list"})
WRITE_TOOLS = frozenset({"write", "edit", "create", "apply_patch", "str_replace", "patch",
                         "multi_edit", "delete", "move", "rename"})
SHELL_TOOLS = frozenset({"shell", "bash", "exec", "run", "sh", "terminal"})
_EXIT = re.compile(r"exit code[:= ]+(-?\d+)", re.IGNORECASE)
_ERROR_LINE = re.compile(
    r"error|exception|traceback|fail|fatal|panic|assert|denied|not found|no such|invalid|"
    r"cannot|can't|unable|refused|timed out|timeout",
    re.IGNORECASE,
)


def cap(text: str, n: int) -> str:
    """``text`` in at most about ``n`` characters: its start and end, with the cut marked."""
    text = text.strip()
    if len(text) <= n:
        return text
    head = n * 3 // 4
    return f"{text[:head]} … [{len(text) - n} chars omitted] … {text[len(text) - (n - head):]}"


def exit_code(result: Message, *, scan_text: bool = True) -> int | None:
    """The exit code of a command's result: from its meta, or (``scan_text``) stated in its
    text."""
    meta = result.meta or {}
    code = meta.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    if not scan_text:
        return None
    m = _EXIT.search(result.text[-400:]) or _EXIT.search(result.text[:400])
    return int(m.group(1)) if m else None


def error_excerpt(text: str, n: int = 800) -> str:
    """The lines of an error output that say what went wrong, and its last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    picked = [line for line in lines if _ERROR_LINE.search(line)][-6:]
    if lines[-1] not in picked:
        picked.append(lines[-1])
    return cap(" | ".join(dict.fromkeys(cap(line, 300) for line in picked)), n)


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
            if m.role != "tool" or eid is None or eid in cleared or (m.meta or {}).get("kind"):
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
        args = orjson.dumps(call.arguments).decode()
        if len(args) > 200:
            args = args[:200] + "…"
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
    meta = result.meta or {}
    if is_truncated(meta):
        saved = meta["truncated"].get("saved_path")
        if saved:
            how = (f"The full output is saved at {saved}; read it with "
                   f"read(path={orjson.dumps(saved).decode()}, offset=1, limit=2000).")
    code = exit_code(result, scan_text=call is None or call.name in SHELL_TOOLS)
    error = ""
    if result.is_error or (code is not None and code != 0):
        excerpt = error_excerpt(text, 300)
        status = f"exit code {code}" if code is not None else "an error"
        error = f" It ended with {status}: {excerpt}." if excerpt else f" It ended with {status}."
    return f"[Cleared to save context: result of {name}({args}), {size}.{error} {how}]"


@dataclass(frozen=True)
class Cut:
    """Where the kept part of the context starts, and what must stay pinned before it."""

    first_kept: int  # index in the branch
    pins: tuple[str, ...]
    dropped_tokens: int
    dropped_ids: tuple[str, ...]


def choose_cut(state: CompactionState, plan: Plan, budget: int, *,
               reserve: int = 0, steps: bool = True) -> Cut | None:
    """The earliest cut that brings the context to ``budget`` tokens (or the latest possible).

    Cuts fall before a user message (a whole turn) when one reaches the budget, else (when
    ``steps``) before an assistant message (a whole step: a call is never separated from its
    results). The system prompt and the current task (the last user message) are pinned,
    never dropped, and so are the entries ``plan`` already pins.
    """
    ctx = state.render(plan)
    messages, ids = ctx.messages, ctx.entry_ids
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    last_step = max((i for i, m in enumerate(messages) if m.role in ("user", "assistant")),
                    default=None)
    if last_step is None:
        return None
    candidates: list[tuple[int, bool]] = []  # (position, is turn start)
    for i in range(1, last_step + 1):
        m, eid = messages[i], ids[i]
        if eid is None or m.role not in ("user", "assistant"):
            continue
        if state.index.get(eid, -1) >= plan.first_kept and (steps or m.role == "user"):
            candidates.append((i, m.role == "user"))
    if not candidates:
        return None
    # Messages that stay whatever the cut: system messages (the prompt, the summary) and
    # pins. Everything else before a cut is dropped, with the results of its calls.
    plan_pins = set(plan.pinned)
    keep = [
        (m.role == "system" and ids[i] is not None) or ids[i] in plan_pins or i == last_user
        for i, m in enumerate(messages)
    ]
    sizes = state.sizes(messages)
    scale = state.scale
    total = round(sum(sizes) * scale) + state.offset + reserve
    # dropped[k]: estimated tokens dropped by a cut before message k (a prefix sum)
    dropped = [0.0] * (len(messages) + 1)
    for j, n in enumerate(sizes):
        dropped[j + 1] = dropped[j] + (0 if keep[j] else n)
    chosen: int | None = None
    for turns_only in (True, False):
        for pos, is_turn in candidates:
            if turns_only and not is_turn:
                continue
            if total - round(dropped[pos] * scale) <= budget:
                chosen = pos
                break
        if chosen is not None:
            break
    if chosen is None:
        chosen = candidates[-1][0]
    pos = chosen
    return Cut(
        first_kept=state.index[ids[pos] or ""],
        pins=tuple(eid for j in range(pos) if keep[j]
                   and (eid := ids[j]) is not None and eid in state.index),
        dropped_tokens=round(dropped[pos] * scale),
        dropped_ids=tuple(eid for j in range(pos) if not keep[j] and (eid := ids[j]) is not None),
    )


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
