"""``contextree demo``: a real agent loop, offline, on a small coding task.

A ``ScriptedModel`` plays the model: its replies are functions of what the agent sends, so it
reacts to real tool output. Everything else is the real runtime: ``SessionTree`` on a file,
the real ``shell``/``read``/``edit``/``write`` tools confined to a temporary workspace,
truncation with the overflow store (inside the temporary directory), compaction with the
offline digest, then a branch with a summary and a label.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .._messages import Message, ToolCall
from .._overflow import OverflowStore
from .._session import Session, TreeNode
from .._text import shorten
from ..compaction import CompactionLadder, Digest, ToolResults
from ..entries import (
    AnyEntry,
    BranchSummaryEntry,
    CompactionEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
)
from ..models._scripted import ScriptedModel
from ..runtime import (
    DefaultCompactionPipeline,
    DefaultToolPipeline,
    MaxIterations,
    SessionTree,
    SystemPrompt,
    ToolResultLoop,
    agent,
)
from ..runtime._events import CompactedPayload, TruncatedPayload
from ..tools import make_tools
from .sessions import require_directory, require_parent
from .terminal import visible

__all__ = ["DemoDirectoryTaken", "run_demo"]

WINDOW = 12_000  # tokens: small, so the big build log forces a compaction
SYSTEM = ("You are a careful coding agent. Use the tools to inspect and change the project in "
          "the workspace.")
SHOWN_LINES = 12  # lines of each message in "what the model would see next"
SHOWN_CHARS = 1500  # characters of each message there


class DemoDirectoryTaken(Exception):
    """``--dir`` already holds a demo run (or something else in its way)."""

CORE = '''\
"""A tiny calculator."""


def add(a: int, b: int) -> int:
    """Return the sum of a and b."""
    return a - b
'''

TESTS = '''\
import unittest

from calc.core import add


class AddTest(unittest.TestCase):
    def test_add(self) -> None:
        self.assertEqual(add(2, 3), 5)


if __name__ == "__main__":
    unittest.main()
'''

BUILD = '''\
for i in range(1, 5001):
    print(f"step {i} ok")
print("[build] WARNING: module_42.py uses a deprecated API")
print("[build] finished: 5000 steps, 1 warning")
'''

Step = Callable[[Sequence[Message]], Message | str]


class _Calls:
    """Tool-call ids in order, so the session file reads naturally."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, name: str, **arguments: Any) -> Message:
        self.n += 1
        return Message.assistant("", tool_calls=[ToolCall(id=f"call_{self.n}", name=name,
                                                          arguments=arguments)])


def _last_tool(messages: Sequence[Message]) -> str:
    return messages[-1].text if messages and messages[-1].role == "tool" else ""


def _script(python: str) -> tuple[list[Step], list[Step], list[Step]]:
    """The model's replies for the three turns, each reacting to the last tool result."""
    call = _Calls()
    test_cmd = f"{python} -m unittest discover -s tests -t ."

    fix: list[Step] = [
        lambda m: call("shell", command=test_cmd),
        lambda m: (call("read", path="calc/core.py") if "FAILED" in _last_tool(m)
                   else "The tests already pass; nothing to fix."),
        lambda m: (call("edit", path="calc/core.py", old_string="return a - b",
                        new_string="return a + b") if "return a - b" in _last_tool(m)
                   else "I could not find the bug."),
        lambda m: call("shell", command=test_cmd),
        lambda m: ("Fixed it: `add` subtracted instead of adding (calc/core.py line 6). "
                   "The test suite passes now." if "OK" in _last_tool(m)
                   else "The tests still fail:\n" + _last_tool(m)[-500:]),
    ]

    def warnings(m: Sequence[Message]) -> Message | str:
        out = _last_tool(m)
        found = [line for line in out.splitlines() if "WARNING" in line]
        truncated = "[Output truncated" in out
        note = (" The log was long, so only its end was shown; the full output was saved."
                if truncated else "")
        return ("One warning: " + found[0].removeprefix("[build] ").strip() + "." + note
                if found else "No warnings." + note)

    build: list[Step] = [
        lambda m: call("write", path="build.py", content=BUILD),
        lambda m: call("shell", command=f"{python} build.py"),
        warnings,
    ]

    def multiply_edit(m: Sequence[Message]) -> Message:
        return call("edit", path="calc/core.py", old_string='    return a + b\n',
                    new_string='    return a + b\n\n\ndef multiply(a: int, b: int) -> int:\n'
                             '    """Return the product of a and b."""\n    return a * b\n')

    branch: list[Step] = [
        multiply_edit,
        lambda m: call("write", path="tests/test_multiply.py", content=TESTS.replace(
            "add", "multiply").replace("AddTest", "MultiplyTest").replace("2, 3), 5",
                                                                          "2, 3), 6")),
        lambda m: call("shell", command=test_cmd),
        lambda m: ("Added `multiply` with a test; all tests pass." if "OK" in _last_tool(m)
                   else "The new test fails:\n" + _last_tool(m)[-500:]),
    ]
    return fix, build, branch


def _workspace(root: Path) -> None:
    (root / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "calc" / "__init__.py").write_text("")
    (root / "calc" / "core.py").write_text(CORE)
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_add.py").write_text(TESTS)


class _Symbols:
    """Arrows and tags, in ASCII when the terminal cannot show more."""

    def __init__(self, console: Console) -> None:
        fancy = (console.encoding or "").lower().replace("-", "").startswith("utf")
        self.to = "→" if fancy else "->"
        self.back = "←" if fancy else "<-"
        self.tag = "🏷 " if fancy else "label "


def _describe(entry: AnyEntry, label: str | None, sym: _Symbols) -> Text:
    """One tree line; session content is made visible and never read as markup."""
    out = Text()
    if isinstance(entry, MessageEntry):
        m = entry.message
        style = {"user": "green", "assistant": "cyan", "tool": "yellow"}.get(m.role, "white")
        if m.tool_calls:
            calls = ", ".join(f"{c.name}({_short(str(next(iter(c.arguments.values()), '')))})"
                              for c in m.tool_calls)
            out.append("assistant", style="cyan")
            out.append(f" {sym.to} {calls}")
        else:
            out.append(m.role, style=style)
            out.append(f": {_short(m.text)}")
            if m.truncation is not None:
                out.append(" (truncated)", style="yellow")
    elif isinstance(entry, CompactionEntry):
        out.append("compaction", style="bold blue")
        out.append(f": {entry.tokens_before:,} {sym.to} {entry.tokens_after or 0:,} tokens")
    elif isinstance(entry, BranchSummaryEntry):
        out.append("branch summary", style="bold blue")
        out.append(f": {_short(entry.summary)}")
    elif isinstance(entry, ModelChangeEntry):
        out.append(f"model: {visible(entry.provider)}/{visible(entry.model_id)}", style="dim")
    else:
        out.append(type(entry).__name__, style="dim")
    if label:
        out.append(f" {sym.tag}{visible(label)}", style="bold magenta")
    return out


def _short(text: str, n: int = 70) -> str:
    return visible(shorten(" ".join(text.split()), n))


def _exact(m: Message) -> tuple[Text, int]:
    """A message as the model gets it, whitespace kept, cut at ``SHOWN_LINES`` lines or
    ``SHOWN_CHARS`` characters with a marker saying how much is not shown."""
    body = m.text
    if m.tool_calls:
        calls = "\n".join(f"{c.name} {orjson.dumps(c.arguments).decode()}"
                           for c in m.tool_calls)
        body = f"{body}\n{calls}" if body else calls
    lines = body.split("\n")
    shown = "\n".join(lines[:SHOWN_LINES])[:SHOWN_CHARS]
    out = Text("\n".join(visible(line, tabs=True) for line in shown.split("\n")))
    hidden = len(body) - len(shown)
    if hidden > 0:
        more = body[len(shown):].count("\n")
        out.append(f"\n[… {hidden:,} more characters"
                   + (f", {more:,} more lines" if more else "") + " not shown here]",
                   style="bold yellow")
    return out, hidden


def _children(node: TreeNode) -> list[TreeNode]:
    """Children, with label entries replaced by theirs (labels are shown inline)."""
    out: list[TreeNode] = []
    todo = list(reversed(node.children))
    while todo:
        child = todo.pop()
        if isinstance(child.entry, LabelEntry):
            todo.extend(reversed(child.children))
        else:
            out.append(child)
    return out


def _render_tree(session: Session, sym: _Symbols) -> Tree:
    """Chains of single children stay at one level; each branch gets its own subtree."""
    root = Tree(Text(f"session {visible(session.id)}", style="bold"))
    stack: list[tuple[Tree, TreeNode]] = [(root, n) for n in reversed(session.tree())]
    while stack:
        parent, node = stack.pop()
        while True:
            children = _children(node)
            line = _describe(node.entry, node.label, sym)
            if node.is_leaf:
                line.append(f" {sym.back} leaf", style="bold green")
            here = parent.add(line)
            if len(children) == 1:
                node = children[0]
                continue
            subtrees = []
            for n, child in enumerate(children, start=1):
                current = " (current)" if child.on_branch else ""
                subtrees.append((here.add(Text(f"branch {n}{current}", style="bold")), child))
            stack.extend(reversed(subtrees))
            break
    return root


def run_demo(workdir: Path | None = None, console: Console | None = None) -> dict[str, Any]:
    """Run the demo in ``workdir`` and print it; without one, in a temporary directory that
    is removed at the end.

    Returns facts about the run: the session path, entry, compaction, truncation and branch
    counts, the overflow files, the final replies, and whether the directory was kept.
    ``workdir`` is made when missing, but not its parent (no command creates missing
    directories: ``CommandFailed`` then); ``DemoDirectoryTaken`` if ``workdir`` already holds
    a run. The session header records the workspace by absolute path.
    """
    console = console or Console()
    if workdir is None:
        folder = Path(tempfile.mkdtemp(prefix="contextree-demo-"))
        try:
            return _run(folder, console, kept=False)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    given = Path(workdir)
    _check_free(given)
    workdir = given.absolute()
    workdir.mkdir(exist_ok=True)
    return _run(workdir, console, kept=True)


def _check_free(workdir: Path) -> None:
    require_parent(str(workdir), "give --dir a new directory in one that exists")
    require_directory(workdir, "give --dir a new or empty directory")
    for name in ("session.jsonl", "workspace", "overflow"):
        if (workdir / name).exists():
            raise DemoDirectoryTaken(f"{workdir} already holds a demo run ({name}); give --dir "
                                     "a new or empty directory, or remove that one first")


def _say(console: Console, *parts: tuple[str, str]) -> None:
    """One line of pieces with styles; the text is made visible, never read as markup."""
    line = Text()
    for text, style in parts:
        line.append(visible(text, tabs=True), style=style)
    console.print(line)


def _run(workdir: Path, console: Console, *, kept: bool) -> dict[str, Any]:
    sym = _Symbols(console)
    workspace = workdir / "workspace"
    _workspace(workspace)
    store = OverflowStore(workdir / "overflow", gc_interval=None)
    path = workdir / "session.jsonl"
    python = shlex.quote(sys.executable)
    fix, build, branch = _script(python)
    model = ScriptedModel([*fix, *build, *branch], name="scripted-demo")

    facts: dict[str, Any] = {"compactions": 0, "truncations": 0, "replies": []}
    compactions: list[CompactedPayload] = []
    truncations: list[TruncatedPayload] = []
    demo = (agent()
            .use(SessionTree, path=path, cwd=str(workspace))
            .use(SystemPrompt, text=SYSTEM)
            .use(ToolResultLoop)
            .use(MaxIterations, limit=20)
            # No summarizer: the ladder ends at the offline digest. The sliding window is left
            # out so the digest (what was asked, read, changed and run) is what you see.
            .use(DefaultCompactionPipeline, window=WINDOW,
                 ladder=CompactionLadder([ToolResults(), Digest()]))
            .use(DefaultToolPipeline, tools=make_tools(workspace, store=store), store=store)
            .run(model))
    demo.on(CompactedPayload, lambda env, p: compactions.append(p))
    demo.on(TruncatedPayload, lambda env, p: truncations.append(p))

    def turn(prompt: str) -> str:
        console.print()
        _say(console, ("user ", "bold green"), (prompt, ""))
        result = demo.start(prompt)
        _say(console, ("agent ", "bold cyan"), (result.text, ""),
             (f"  ({result.iterations + 1} model calls)", "dim"))
        facts["replies"].append(result.text)
        return result.text

    console.rule(Text("contextree demo: an agent fixes a bug, offline", style="bold"))
    _say(console, (f"workspace: {workspace}", ""))
    _say(console, (f"session:   {path}", ""))
    turn("The tests in this project fail. Find the bug and fix it.")
    with Session.open(path) as s:
        fixed_at = s.leaf_id
        assert fixed_at is not None
        s.set_label(fixed_at, "tests-fixed")
    turn("Write build.py that prints a verbose build log, run it, and tell me about warnings.")
    for c in compactions:
        applied = ", ".join(s.name for s in c.stages if s.applied)
        _say(console, ("compacted", "bold blue"),
             (f": {c.tokens_before:,} {sym.to} {c.tokens_after:,} tokens ({applied}; "
              f"{len(c.cleared)} tool results cleared, {len(c.dropped)} entries dropped "
              "from the context, all kept in the file)", ""))
    for t in truncations:
        _say(console, ("truncated", "bold yellow"),
             (f": {t.total_lines or 0:,} lines {sym.to} saved to {t.saved_path}", ""))

    console.print()
    _say(console, ("Branching", "bold"), (": back to the entry labelled 'tests-fixed', with a "
                                         "summary of the abandoned branch.", ""))
    with Session.open(path) as s:
        s.move_to(fixed_at, summary="Explored a verbose build log (5000 steps, one deprecation "
                                    "warning in module_42.py); no code changed.")
    turn("Now add a multiply function with a test.")

    with Session.open(path) as s:
        stats = s.stats()
        context = s.build_context().messages
        console.rule(Text("The session tree", style="bold"))
        console.print(_render_tree(s, sym))
        console.rule(Text("Stats", style="bold"))
        table = Table(show_header=False)
        table.add_row("entries", str(stats.entry_count))
        table.add_row("branches", str(stats.branch_count))
        table.add_row("messages (file)", str(stats.file.message_count))
        table.add_row("messages (current branch)", str(stats.branch.message_count))
        table.add_row("compactions", str(stats.file.compactions))
        table.add_row("billed tokens (file)", f"{stats.total_tokens:,}")
        console.print(table)
        console.rule(Text("What the model would see next", style="bold"))
        _say(console, (f"Each message exactly as sent, whitespace kept; a long one is cut at "
                       f"{SHOWN_LINES} lines or {SHOWN_CHARS:,} characters, marked [… not shown "
                       "here] (`contextree show FILE --context` prints it whole).", "dim"))
        console.print(Panel(Text(visible(SYSTEM, tabs=True)), title_align="left", expand=True,
                            title="system (SystemPrompt sends it first on every call; it is "
                                  "not stored in the session)"))
        elided = 0
        for m in context:
            body, hidden = _exact(m)
            elided += hidden > 0
            title = m.role + (f" <{m.kind.value.replace('_', ' ')}>" if m.kind else "")
            console.print(Panel(body, title=visible(title), title_align="left", expand=True))
        facts.update(
            session_path=str(path),
            workspace=str(workspace),
            session_id=s.id,
            entries=stats.entry_count,
            branches=stats.branch_count,
            compactions=stats.file.compactions,
            truncations=len(truncations),
            overflow_files=sorted(str(p) for p in (workdir / "overflow").rglob("*")
                                  if p.is_file()),
            context_messages=len(context),
            elided_messages=elided,
            label=s.label_of(fixed_at),
            model_calls=len(model.calls),
            kept=kept,
        )
    facts["compacted_events"] = len(compactions)
    facts["tests_pass"] = "passes" in facts["replies"][0] and "pass" in facts["replies"][-1]
    warning = re.search(r"module_\d+\.py", facts["replies"][1])
    facts["warning_found"] = warning.group(0) if warning else None
    console.print()
    if kept:
        _say(console, (f"Session file: {path}  (try: contextree tree {path})", "dim"))
    else:
        _say(console, ("The run was in a temporary directory, now removed; `contextree demo "
                       "--dir DIR` keeps its session to explore (`contextree tree "
                       "DIR/session.jsonl`).", "dim"))
    return facts
