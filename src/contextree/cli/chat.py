"""``contextree chat``: an interactive agent session in the terminal, on the session tree.

The model is named by ``--model`` and ``--base-url`` (or ``$CONTEXTREE_MODEL`` and
``$CONTEXTREE_BASE_URL``), as in every command that takes one (``model_options``), else it
is the one the session recorded. Replies stream as they arrive; the built-in tools work in
the current directory and nowhere else, and ``shell``, ``write`` and ``edit`` calls are asked
about first. The model also writes the summaries when the context fills up. Ctrl-C stops a
reply (what arrived is kept) and the chat goes on; slash commands move around the session
tree. The tool set is recorded in the session (``show --context`` lists it).
"""

from __future__ import annotations

import json
import os
import re
import select
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, TextIO

import typer

from .._messages import ToolCall, valid_text
from .._overflow import user_home
from .._session import Session
from .._stats import cost_text
from .._text import INVISIBLE, count_lines, first_line, shorten
from ..entries import LabelEntry
from ..errors import ContextreeError, SessionNotFound
from ..models._base import Model
from ..runtime import (
    Agent,
    BudgetPayload,
    CompactedPayload,
    CompactionStartPayload,
    DefaultCompactionPipeline,
    DefaultToolPipeline,
    InterruptedPayload,
    Payload,
    Retry,
    RetryPayload,
    SessionTree,
    StopReason,
    SystemPrompt,
    TextDeltaPayload,
    ThinkingDeltaPayload,
    ToolEndPayload,
    ToolResultLoop,
    ToolStartPayload,
    TurnEndPayload,
    agent,
)
from ..runtime._env import Env
from ..tokens import EstimateCounter
from ..tools import ToolKind, make_tools
from .app import cli_words, command, os_error
from .model_options import BaseUrlOpt, ModelOpt, make_model
from .output import CommandFailed, UsageProblem, short_id
from .render import entry_summary, message_summary, tree_lines
from .sessions import address_of, open_session, require_parent, resolve_entry
from .terminal import visible

_INVISIBLE = re.compile(f"[{INVISIBLE}]")

DEFAULT_WINDOW = 128_000
ASKED = (ToolKind.SHELL, ToolKind.WRITE, ToolKind.EDIT)
SYSTEM = ("You are a careful coding assistant working in {cwd}. Use the tools to read, "
          "search and change files there; say what you did.")
HELP = """commands:
  /tree               the session tree (* marks the current branch)
  /checkout ID|LABEL  go back to an entry; the next message branches from there
  /fork PATH          copy the current branch to a new session file and go on there
  /label TEXT         label the current entry (/label --clear removes it)
  /compact            compact the context now (the model writes the summary)
  /context            what the model will see next
  /stats              tokens and cost
  /exit               leave (Ctrl-D too); Ctrl-C stops a reply"""


# -- the model -------------------------------------------------------------------------------


NO_MODEL = ("no model to chat with: pass --model [PROVIDER:]MODEL or set CONTEXTREE_MODEL, "
            "with OPENAI_BASE_URL (and OPENAI_API_KEY) for an OpenAI-compatible server, or "
            "ANTHROPIC_API_KEY for Anthropic")


def default_session_path() -> Path:
    """Where a chat without a FILE is kept: ``chats/`` in ``$CONTEXTREE_HOME`` (default: the
    user data directory), beside the overflow store."""
    return user_home() / "chats" / f"chat-{datetime.now():%Y%m%d-%H%M%S}.jsonl"


# -- the terminal ------------------------------------------------------------------------------


class Screen:
    """What the chat prints: streamed text as it comes, the rest on lines of their own.

    While an approval question waits (``ask(..., hold=True)`` until ``answered``), what the
    other tool calls print is held back: the question stays the last thing on the screen,
    never scrolled away or followed by lines that look like another question."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.color = out.isatty() and not os.environ.get("NO_COLOR")
        self._mid_line = False
        self._held: list[str] | None = None  # written once the question is answered
        self._lock = threading.Lock()

    def _style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _write(self, text: str) -> None:
        if self._held is not None:
            self._held.append(text)
            return
        self.out.write(text)
        self.out.flush()

    def stream(self, text: str, *, dim: bool = False) -> None:
        """More of a reply, on the current line (escapes made visible, newlines kept)."""
        text = _shown(text)
        with self._lock:
            self._write(self._style(text, "2") if dim else text)
            self._mid_line = not text.endswith("\n")

    def line(self, text: str = "", *, dim: bool = False) -> None:
        """A line of its own (escapes made visible; newlines kept as lines)."""
        text = _shown(text)
        with self._lock:
            self._write(("\n" if self._mid_line else "")
                        + (self._style(text, "2") if dim else text) + "\n")
            self._mid_line = False

    def ask(self, question: str, *, hold: bool = False) -> None:
        """A question whose answer is typed on the same line (escapes made visible);
        ``hold``: what is printed meanwhile waits for ``answered``."""
        question = _shown(question)
        with self._lock:
            self._write(("\n" if self._mid_line else "") + question)
            self._mid_line = False
            if hold:
                self._held = []

    def answered(self) -> None:
        """The question is answered: print what was held back meanwhile."""
        with self._lock:
            held, self._held = self._held, None
            if held:
                self._write("".join(held))


class Chat:
    """One interactive chat on ``session``: turns, tool approvals and slash commands."""

    def __init__(self, session: Session, model: Model, *, target: str, window: int,
                 approve_all: bool, system: str | None, stream: bool, stdin: TextIO,
                 stdout: TextIO) -> None:
        self.session = session
        self.target = target  # what `contextree chat` resumes: the session the chat is on
        self.model = model
        self.window = window
        self.approve_all = approve_all
        self.system = system or SYSTEM.format(cwd=Path.cwd())
        self.streaming = stream
        self.stdin = stdin
        self.screen = Screen(stdout)
        self.tools = make_tools(workspace=Path.cwd(), cwd=Path.cwd())
        self.kinds = {t.name: t.kind for t in self.tools}
        self.asking = threading.Event()  # a tool thread is reading an approval
        self.tools_unchecked = True  # the branch may not record this tool set yet
        self.agent = self._agent()

    # -- the agent ---------------------------------------------------------------------------
    def _agent(self) -> Agent:
        return (agent()
                .use(SessionTree, session=self.session)
                .use(SystemPrompt, text=self.system)
                .use(ToolResultLoop)
                .use(Retry, attempts=3)
                .use(DefaultCompactionPipeline, window=self.window, summarizer=self.model)
                .use(DefaultToolPipeline, tools=self.tools, tool_approve=self.approve)
                .run(self.model, stream=self.streaming))

    def _asks(self, call: ToolCall) -> bool:
        return not self.approve_all and self.kinds.get(call.name) in ASKED

    def approve(self, call: ToolCall, env: Env) -> bool | str:
        """Ask before a call that runs commands or changes files."""
        if not self._asks(call):
            return True
        if env.cancelled:
            return "the turn was interrupted"
        self.asking.set()
        try:
            if self._discard_typeahead():
                self.screen.line("(what was typed before this question was ignored: "
                                 "answer the question below)", dim=True)
            self.screen.ask(_approval_question(call), hold=True)
            try:
                answer = self._answer(env)
            finally:
                self.screen.answered()
        finally:
            self.asking.clear()
        if answer is None:
            return "the turn was interrupted"
        if answer.strip().lower() in ("y", "yes"):
            return True
        return "the user said no"

    def _terminal_fd(self) -> int | None:
        """The descriptor of the terminal the chat reads, or ``None`` when its input is
        piped (or on Windows, whose console handles ``select()`` does not take)."""
        try:
            return (self.stdin.fileno() if self.stdin.isatty() and sys.platform != "win32"
                    else None)
        except (OSError, ValueError):
            return None

    def _discard_typeahead(self) -> bool:
        """Throw away what was typed on the terminal before an approval question is shown
        (a ``y`` typed ahead, at a model's request or by habit, must not answer a question
        nobody saw); True if there was any. Piped input is a script, and kept."""
        fd = self._terminal_fd()
        if fd is None or not select.select([fd], [], [], 0)[0]:
            return False
        import termios

        try:
            termios.tcflush(fd, termios.TCIFLUSH)
        except termios.error:
            return False
        return True

    def _answer(self, env: Env) -> str | None:
        """The line typed at an approval prompt, or ``None`` once the turn is interrupted
        (Ctrl-C): on a terminal the line is read only when one is there, so the next line
        typed after Ctrl-C goes to the chat, not to a prompt nobody waits for."""
        fd = self._terminal_fd()
        while fd is not None and not env.cancelled:
            if select.select([fd], [], [], 0.05)[0]:
                break
        if env.cancelled:
            return None
        answer = self.stdin.readline()
        if fd is None:  # piped: nothing echoed the answer, so its line is ended here
            self.screen.line()
        return answer

    def record_tools(self) -> None:
        """Record the tool set on the branch when what it says differs (a new session, one
        from before the tools changed, a checkout to before the record)."""
        names = [t.name for t in self.tools]
        if self.session.build_context().active_tools != names:
            self.session.append_active_tools_change(names)
        self.tools_unchecked = False

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> None:
        """Read messages and commands until /exit or end of input."""
        model = self.model
        where = getattr(model, "base_url", "")
        self.screen.line(f"contextree chat: {model.provider}/{model.name}"
                         + (f" at {where}" if where else ""), dim=True)
        n = len(self.session.build_context().messages)
        self.screen.line(f"session {self.session.location} ({n} messages); "
                         "/help for commands", dim=True)
        while True:
            try:
                self.screen.ask("> ")
                text = self.stdin.readline()
            except KeyboardInterrupt:
                self.screen.line("(Ctrl-D or /exit leaves)", dim=True)
                continue
            if not text:  # end of input
                self.screen.line()
                return
            text = text.rstrip("\n")
            if not text.strip():
                continue
            if valid_text(text) != text:  # bytes that were not UTF-8 read as surrogates
                self.screen.line(f"error: this line is not UTF-8 ({visible(text)}): set the "
                                 "terminal (or what feeds the chat) to UTF-8, e.g. "
                                 "LANG=C.UTF-8, and type it again")
                continue
            if text.startswith("/"):
                try:
                    if not self.command(text):
                        return
                except (ContextreeError, UsageProblem, CommandFailed, ValueError) as e:
                    self.screen.line(f"error: {cli_words(str(e))}")
                except OSError as e:
                    self.screen.line(f"error: {cli_words(os_error(e))}")
                continue
            self.turn(text)

    def turn(self, text: str) -> None:
        """One turn, its events shown as they happen; Ctrl-C stops it and keeps what came."""
        if self.tools_unchecked:
            self.record_tools()
        stream = self.agent.stream(text)
        try:
            with stream:
                for event in stream:
                    self.show(event)
        except KeyboardInterrupt:
            for event in stream:  # the ending of the interrupted turn
                self.show(event)
            while self.asking.is_set():  # the prompt sees the interruption and gives up
                time.sleep(0.01)
        except ContextreeError as e:
            self.screen.line(f"error: {e}")

    def show(self, event: Payload) -> None:
        """Print one event."""
        screen = self.screen
        if isinstance(event, TextDeltaPayload):
            screen.stream(event.text)
        elif isinstance(event, ThinkingDeltaPayload):
            screen.stream(event.text, dim=True)
        elif isinstance(event, ToolStartPayload) and not self._asks(event.call):
            screen.line(f"-> {event.call.name}({_describe(event.call)})", dim=True)
        elif isinstance(event, ToolEndPayload):
            result = event.result
            lines = count_lines(result.content) if isinstance(result.content, str) else 1
            head = shorten(first_line(str(result.content)), 100)
            screen.line(f"<- {'error: ' if result.is_error else ''}{head}"
                        + (f" ({lines} lines)" if lines > 1 else ""), dim=True)
        elif isinstance(event, CompactionStartPayload):
            screen.line(f"[compacting: {event.tokens:,} tokens in a {event.window:,} "
                        "window]", dim=True)
        elif isinstance(event, CompactedPayload):
            screen.line(f"[compacted: {event.tokens_before:,} -> "
                        f"{event.tokens_after:,} tokens]", dim=True)
        elif isinstance(event, RetryPayload):
            screen.line(f"[retrying in {event.delay:.0f} s: {event.error}]", dim=True)
        elif isinstance(event, InterruptedPayload):
            screen.line("[interrupted: the partial reply is saved]", dim=True)
        elif isinstance(event, BudgetPayload):
            screen.line("[stopped: budget]", dim=True)
        elif isinstance(event, TurnEndPayload):
            usage, cost = event.usage, event.cost
            if event.stopped not in (None, StopReason.INTERRUPTED):
                screen.line(f"[stopped: {event.stopped}]", dim=True)
            billed = usage.input + usage.cache_read + usage.cache_write + usage.output
            money = cost_text(cost, 0) if cost is not None else "cost unknown"
            screen.line(f"[{billed:,} tokens, {money}]", dim=True)

    # -- slash commands -------------------------------------------------------------------------
    def command(self, line: str) -> bool:
        """Run a slash command; False to leave the chat."""
        name, _, arg = line[1:].strip().partition(" ")
        arg = arg.strip()
        handlers: dict[str, Callable[[str], None]] = {
            "tree": self.tree, "checkout": self.checkout, "fork": self.fork,
            "label": self.label, "compact": self.compact, "context": self.context,
            "stats": self.stats, "help": lambda _: self.screen.line(HELP),
        }
        if name in ("exit", "quit", "q"):
            return False
        handler = handlers.get(name)
        if handler is None:
            self.screen.line(f"unknown command /{name}; /help lists them")
        else:
            handler(arg)
        return True

    def tree(self, _: str) -> None:
        roots = self.session.tree()
        if not roots:
            self.screen.line("(empty session)")
        for line in tree_lines(roots):
            node = line.node
            if node is None:
                self.screen.line(f"  {line.prefix}... {line.hidden} entries ...", dim=True)
                continue
            tail = (f"  [{node.label}]" if node.label else "") + (
                "  <- leaf" if node.is_leaf else "")
            mark = "* " if node.on_branch else "  "
            summary = shorten(entry_summary(node.entry), 70)
            self.screen.line(f"{mark}{line.prefix}{short_id(node.entry.id)}  {summary}{tail}")

    def checkout(self, ref: str) -> None:
        if not ref:
            raise UsageProblem("/checkout needs an entry id or a label (see /tree)")
        target = resolve_entry(self.session, ref)
        if target == self.session.leaf_id:
            self.screen.line(f"already at {short_id(target)}; nothing changed")
            return
        self.session.move_to(target)
        self.tools_unchecked = True
        entry = self.session.get_entry(target)
        what = shorten(entry_summary(entry), 80) if entry is not None else ""
        self.screen.line(f"now at {short_id(target)}: {what}; "
                         "the next message branches from here")

    def fork(self, path: str) -> None:
        if not path:
            raise UsageProblem("/fork needs the path of the new session file")
        require_parent(path, "choose another path")
        new = self.session.fork(Path(path))
        old = self.session.location
        self.session.close()
        self.session = new
        self.target = path
        self.tools_unchecked = True
        self.agent = self._agent()
        self.screen.line(f"forked {old} to {new.location}; the chat goes on there")

    def label(self, text: str) -> None:
        leaf = self.session.leaf_id
        # The entry the leaf stands for: a label entry written by /label is not labelled.
        entry = self.session.get_entry(leaf) if leaf is not None else None
        while isinstance(entry, LabelEntry) and entry.parent_id is not None:
            leaf, entry = entry.parent_id, self.session.get_entry(entry.parent_id)
        if leaf is None or isinstance(entry, LabelEntry):
            raise UsageProblem("nothing to label yet")
        if text == "--clear":
            done = self.session.set_label(leaf, None)
            self.screen.line(f"label of {short_id(leaf)} cleared" if done else
                             f"{short_id(leaf)} has no label; nothing changed")
        elif not text:
            raise UsageProblem("/label needs a text (or --clear)")
        else:
            done = self.session.set_label(leaf, text)
            self.screen.line(f"labelled {short_id(leaf)} {text!r}" if done else
                             f"{short_id(leaf)} is already labelled {text!r}; nothing changed")

    def compact(self, _: str) -> None:
        self.screen.line("[compacting...]", dim=True)
        result = self.session.compact(self.window, model=self.model, force=True)
        if result.entry_id is None:
            self.screen.line(f"nothing compacted: {result.reason}")
            return
        missed = "" if result.reached_target else f" (target {result.target:,} not reached)"
        self.screen.line(f"compacted: {result.tokens_before:,} -> {result.tokens_after:,} "
                         f"tokens{missed}")

    def context(self, _: str) -> None:
        ctx = self.session.build_context()
        tokens = ctx.measure(EstimateCounter()).tokens
        self.screen.line(f"system: {shorten(first_line(self.system), 90)}")
        for i, m in enumerate(ctx.messages):
            self.screen.line(f"[{i}] {shorten(message_summary(m), 100)}")
        self.screen.line(f"{len(ctx.messages)} messages, about {tokens:,} tokens of a "
                         f"{self.window:,} window")

    def stats(self, _: str) -> None:
        s = self.session.stats()
        f = s.file
        self.screen.line(f"messages {f.message_count}, tokens {f.total_tokens:,}, "
                         f"cost {f.cost_text}, branches {s.branch_count}")
        for key in sorted(f.by_model):
            u = f.by_model[key]
            self.screen.line(f"  {key}: {u.input:,} in, {u.output:,} out, "
                             f"{f.model_cost_text(key)}")
        if s.prices_hint:
            self.screen.line(f"  ({s.prices_hint})")


def _shown(text: str) -> str:
    """``text`` as the chat prints it: every control character and terminal escape made
    visible (``\\x1b``...), lines kept as lines. Model text, tool results, paths, ``/tree``
    and ``/context`` all reach the terminal through this, streamed text included."""
    if "\n" not in text:
        return visible(text, tabs=True)
    return "\n".join(visible(part, tabs=True) for part in text.split("\n"))


def _approval_question(call: ToolCall) -> str:
    """The approval prompt: the exact command (or path, or arguments) in full, every line
    of it numbered, escapes visible and every invisible character written as its escape
    (``\\u200b``, with a note saying how many there are), so what runs is what the person
    saw; a write shows what goes into the file, an edit the text replaced and its
    replacement."""
    args = call.arguments
    path = args.get("path")
    if isinstance(path, str) and isinstance(args.get("content"), str):
        return _change_question(call.name, path, "to", [("", args["content"])])
    old, new = args.get("old_string"), args.get("new_string")
    if isinstance(path, str) and isinstance(old, str) and isinstance(new, str):
        return _change_question(call.name, path, "of", [("-", old), ("+", new)],
                                every=args.get("replace_all") is True)
    what = next((args[k] for k in ("command", "path", "pattern") if isinstance(args.get(k), str)),
                None)
    text = what if what is not None else json.dumps(args, ensure_ascii=False, indent=1)
    note = _hidden_note(text)
    lines = text.split("\n")
    if len(lines) == 1 and len(text) <= 200:
        return f"{note}allow {call.name}: {_exact(text)}? [y/N] "
    shown = "\n".join(f"  {n:>3} | {_exact(line)}" for n, line in enumerate(lines, start=1))
    return (f"allow {call.name} ({len(lines)} line{'s' if len(lines) != 1 else ''}, "
            f"{len(text):,} characters, shown in full):\n{shown}\n"
            f"{note}allow this {call.name}? [y/N] ")


def _exact(text: str) -> str:
    """Text a person approves, as it will run: controls and invisible characters escaped."""
    return visible(text, tabs=True, hidden=True)


def _hidden_note(*texts: str) -> str:
    """A line saying how many invisible characters ``texts`` hold (shown as escapes), or
    nothing: a ``\\u200b`` among a long command is easy to miss."""
    count = sum(len(_INVISIBLE.findall(t)) for t in texts)
    if not count:
        return ""
    return (f"note: {count:,} invisible character{'s are' if count != 1 else ' is'} shown "
            "above as escapes (\\u...): it runs with them\n")


def _change_question(name: str, path: str, preposition: str, texts: list[tuple[str, str]], *,
                     every: bool = False) -> str:
    """The approval prompt of a file change: each text (``sign`` "" for a write's content,
    "-" and "+" for an edit's) with its lines numbered, in full, escapes visible."""
    shown, counts = [], []
    for sign, text in texts:
        lines = text.split("\n")
        if len(lines) > 1 and lines[-1] == "":  # a final newline ends a line, adds none
            lines.pop()
        counts.append(f"{len(lines)} line{'s' if len(lines) != 1 else ''}")
        shown += [f"  {sign}{n:>{3 - len(sign)}} | {_exact(line)}"
                  for n, line in enumerate(lines, start=1)]
    if len(texts) == 1:
        what = f"{counts[0]}, {len(texts[0][1]):,} characters"
    else:
        what = f"replace {counts[0]} with {counts[1]}" + (", every match" if every else "")
    note = _hidden_note(path, *(text for _, text in texts))
    return (f"allow {name} {preposition} {visible(path, hidden=True)} ({what}, shown in full):\n"
            + "\n".join(shown) + f"\n{note}allow this {name}? [y/N] ")


def _describe(call: ToolCall) -> str:
    """A call's arguments in a line (the command for ``shell``, the path for files)."""
    args = call.arguments
    for key in ("command", "path", "pattern"):
        if isinstance(args.get(key), str):
            return shorten(first_line(args[key]), 120)
    return shorten(", ".join(f"{k}={v!r}" for k, v in args.items()), 120)


# -- the command -------------------------------------------------------------------------------


@command("chat")
def chat_command(
    file: Annotated[str | None, typer.Argument(
        metavar="TARGET", help="The session to resume: a file (created when missing, in a "
        "directory that exists) or a URL with #SESSION_ID; or where to start a new one: a "
        "directory or a postgresql:// URL without #. Default: a new file in "
        "$CONTEXTREE_HOME/chats.", show_default=False)] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    window: Annotated[int, typer.Option(help="The model's context window, in tokens.",
                                        min=1000)] = DEFAULT_WINDOW,
    yes: Annotated[bool, typer.Option("--yes", "-y",
                                      help="Run shell, write and edit calls without asking.")]
    = False,
    system: Annotated[str | None, typer.Option(help="The system prompt.")] = None,
    no_stream: Annotated[bool, typer.Option("--no-stream",
                                            help="Ask for whole replies (for a server that "
                                            "cannot stream).")] = False,
) -> None:
    """Chat with a model in this directory: streamed replies, tools that ask first, the
    session tree underneath (/help inside lists the commands). The model is --model, else
    the one the session recorded."""
    target = file or str(default_session_path())
    session = None if _is_catalog(target) else _existing(target)
    chat: Chat | None = None
    try:
        recorded = session.build_context().model if session is not None else None
        chosen = make_model(model, base_url, recorded)
        if chosen is None:
            raise UsageProblem(NO_MODEL)
        if session is None:  # only now, with a model to talk to, is anything created
            session, target = _create(target, default=file is None)
        chat = Chat(session, chosen, target=target, window=window, approve_all=yes,
                    system=system, stream=not no_stream, stdin=sys.stdin, stdout=sys.stdout)
        chat.run()
    finally:
        current = chat.session if chat is not None else session
        if current is not None:
            current.close()
    shown = resumable(chat.target)
    print(visible(f"session saved: {shown} (resume: contextree chat {shown})"))


def _is_catalog(target: str) -> bool:
    """Whether ``target`` names a place that holds sessions (a directory, a database URL
    without ``#SESSION_ID``) rather than one session."""
    address = address_of(target)
    if address.is_file:
        return Path(target).is_dir()
    return address.session_id is None


def resumable(target: str) -> str:
    """``target`` as the exit hint prints it: a URL without its password (libpq takes it
    from PGPASSWORD or ~/.pgpass when the chat is resumed)."""
    if address_of(target).is_file:
        return target
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(target)
    if parts.password is None:
        return target
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _existing(target: str) -> Session | None:
    """The session at ``target`` if there is one (opened for writing), else ``None``."""
    try:
        return open_session(target)
    except SessionNotFound:
        return None


def _create(target: str, *, default: bool) -> tuple[Session, str]:
    """A new session at ``target`` and what resumes it. In a catalog (a directory, a
    database) it gets a new id; the default chats directory is made when missing, a
    directory the user named must exist (no command creates directories)."""
    if _is_catalog(target):
        from .._session import new_session_id
        from .catalogs import open_catalog_of

        catalog, _ = open_catalog_of(target)
        session_id = new_session_id()
        new = catalog.target(session_id)
        return Session.create(new, cwd=str(Path.cwd()), session_id=session_id), new
    if address_of(target).is_file:
        if default:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        require_parent(target, "choose another FILE")
    return Session.open_or_create(target, cwd=str(Path.cwd())), target
