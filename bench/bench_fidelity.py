"""Benchmark: which facts of a coding-agent session survive compaction.

Run: ``python bench/bench_fidelity.py [--quick] [--seed N]`` (a benchmark, not a test: it
prints figures and PASS/MISS against the targets, and always exits 0).

The sessions are written from what real coding-agent sessions contain, not from the
compaction code (this file was written without reading the digest, the stages or the
summarizer). A seeded generator builds sessions of about 50k, 200k and 1M estimated tokens:

- a system prompt; a first user message with the task and four ground rules;
- many tool rounds (read / grep / shell / edit / write) with realistic outputs: Python
  sources, pytest logs, git logs with shas, diffs, ruff and mypy output, stack traces;
- filler user turns that carry no task ("ok, continue"), side requests, French replies;
- 22 planted facts per session, each with a kind and a key string (the task, the rules,
  values the user corrects later, identifiers found only in a tool output and then used in
  a tool call, deferred todos, decisions, files changed, errors resolved and still open,
  and the test a last message refers back to without naming it);
- 5 more probes, reported only per category (Factory's recall, artifact trail,
  continuation, decisions): a date the user gave, a command that ran, a file only read, the
  next step the agent announced, a library the user ruled out.

A fact is *kept* when its key appears (case-insensitive) anywhere in the text of the
compacted context: message text and tool-call names and arguments. For a correction the
stale value is also checked: it is *shown as current* when it appears after the last
mention of the corrected value without the corrected value nearby (or alone).

Scenarios: (a)+(b) one-shot ``Session.compact`` to 50%, 20%, 10% of the session's tokens
with each stage alone and the default ladder (no model, and a scripted summarizer);
(c) an agent loop on the runtime where compaction triggers many times; (d) provider usage
at x0.8 / x1.0 / x1.25 of the estimate; (e) tool-call ids reused across turns (llama.cpp);
(f) imported tool vocabularies (Claude Code, Codex, pi). Also measured: tokens after
compaction / target (``EstimateCounter`` on the built context), the pairing invariant on
every compacted context, and the wall time to compact the 1M-token session.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import string
import sys
import tempfile
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import contextree as ct
from contextree import Message, Session, ToolCall, Usage
from contextree.compaction import (
    CompactionLadder,
    Digest,
    SlidingWindow,
    Summarize,
    ToolResults,
    default_ladder,
)
from contextree.models import ScriptedModel
from contextree.tokens import EstimateCounter

COUNTER = EstimateCounter()

# ---------------------------------------------------------------------------------------
# Facts
# ---------------------------------------------------------------------------------------

KINDS = [
    ("task", "task"),
    ("rule", "user rule"),
    ("correction", "corrected value"),
    ("tool_id", "id from tool output"),
    ("user_fact", "fact the user gave"),
    ("todo", "deferred todo"),
    ("decision", "decision"),
    ("file", "file changed"),
    ("error_resolved", "error resolved"),
    ("error_open", "error still open"),
    ("back_ref", "back-reference"),
]
KIND_LABEL = dict(KINDS)

# Factory's probe categories (their evaluation of compaction on production sessions), and
# the kinds of planted fact that probe each: can the agent still recall what it was told,
# retrace the artifact trail (files changed, errors met and fixed, ids it used), continue
# (what is left to do, what "it" refers to), and keep to what was decided.
CATEGORIES = [
    ("recall", ("task", "rule", "correction", "user_fact", "user_date")),
    ("artifact trail", ("file", "error_resolved", "error_open", "tool_id", "command",
                        "file_read")),
    ("continuation", ("todo", "back_ref", "next_step")),
    ("decisions", ("decision", "rejected")),
]
# The probes planted besides the 22 facts (``Fact.probe``): one more of each category, for
# what the facts did not ask: a date the user gave, a command that ran, a file only read,
# the next step the agent announced, an option the user ruled out. They count in the
# category lines only, so the 22-fact figures stay comparable with earlier runs.
PROBE_KINDS = [
    ("user_date", "date the user gave"),
    ("command", "command that ran"),
    ("file_read", "file only read"),
    ("next_step", "next step announced"),
    ("rejected", "option ruled out"),
]


@dataclass
class Fact:
    kind: str
    key: str
    note: str
    stale: str | None = None  # for corrections: the value the user retracted
    probe: bool = False  # one of the category probes, not of the 22 facts


def _words(text: str) -> list[str]:
    return text.split()


# ---------------------------------------------------------------------------------------
# Word pools (filler never contains a fact's key: every filler text is scrubbed)
# ---------------------------------------------------------------------------------------

NOUNS = _words("""record payload cache batch worker client schema event retry config handler queue
metric report invoice order profile image archive buffer signal route tenant account ledger
cursor snapshot shard replica backoff digest manifest header cookie webhook job task
partition window offset token stream channel blob bucket credential policy audit""")
VERBS = _words("""load parse build fetch resolve apply merge flush encode decode validate render
collect compute refresh sync emit schedule normalize split prune persist restore
serialize register dispatch""")
FIELDS = _words("id name size created_at updated_at status owner kind count total limit url")
TYPES = ["str", "int", "bool", "float", "dict[str, Any]", "list[str]", "bytes", "None"]
STDLIB = _words("os sys json time logging re asyncio hashlib itertools functools pathlib uuid")
AUTHORS = [("Léa Martin", "lea.martin"), ("Tomás Ortega", "tomas"), ("Yuki Sato", "ysato"),
           ("Ana Pereira", "ana.p"), ("Jonas Weber", "jweber"), ("Chidi Okafor", "chidi")]
COMMIT_SUBJECTS = ["fix flaky {n} test", "refactor {n} loading", "bump {n} client to {v}",
                   "add retries to {n} fetch", "docs: explain {n} settings",
                   "ci: cache {n} wheels", "drop unused {n} helper", "speed up {n} parsing",
                   "log {n} failures with context", "type hints for {n} module"]
FILLER_USER = ["ok, continue", "go on", "thanks", "ok", "continue", "yes", "k, keep going",
               "looks good, carry on", "sure", "next", "fine", "ok continue please",
               "merci, continue", "go ahead", "yep"]
SIDE_REQUESTS = ["can you check why {t} is slow?", "also tidy up the imports in {p}",
                 "what does {f} do exactly?", "have a look at the lint errors in {p}",
                 "is {f} still used anywhere?", "run the whole test suite once",
                 "check that the type checker is happy", "why is the {n} module so big?"]
STEP_TEXTS = ["", "", "", "Let me look at {p}.", "Je regarde {p}.", "Running the tests.",
              "Je relance les tests.", "Checking where {f} is used.", "Let me check the log.",
              "Je vérifie le diff."]
REPLIES = ["C'est fait : {f} est corrigé et les tests passent.",
           "J'ai regardé {p} ; rien d'anormal, je continue.",
           "Les tests passent. Prochaine étape : {f}.",
           "J'ai nettoyé {p}. Rien d'autre à signaler.",
           "Fait. {p} est plus lisible maintenant.",
           "Le module {n} est appelé depuis trois endroits ; je laisse tel quel."]


@dataclass
class Domain:
    goal: str
    accept: str
    pkg: str
    mod: str
    cls: str
    test: str
    open_error: str
    assert_line: str
    noun: str
    decision1: str
    decision1_alt: str
    decision2: str
    decision2_why: str


DOMAINS = [
    Domain("add per-client upload quotas to the ingest API", "configurable per tenant",
           "ingest", "quota", "QuotaStore", "test_quota_resets_after_window",
           "AssertionError: expected 429, got 200",
           "assert resp.status_code == 429, f\"expected 429, got {resp.status_code}\"",
           "uploads", "token bucket", "fixed window", "counters in Redis",
           "we don't want another Postgres table"),
    Domain("make the nightly export job resumable after a crash",
           "resume from the last checkpoint", "exporter", "checkpoint", "CheckpointLog",
           "test_resume_skips_finished_chunks", "AssertionError: chunk 7 exported twice",
           "assert exported.count(7) == 1, f\"chunk 7 exported {exported.count(7)} times\"",
           "rows", "write-ahead manifest", "marker files", "manifest in object storage",
           "the workers have no shared disk"),
    Domain("move web sessions from memcached to Postgres", "zero-downtime cutover",
           "webapp", "session_store", "PgSessionStore", "test_expired_sessions_are_purged",
           "AssertionError: 3 expired sessions left after purge",
           "assert store.count_expired() == 0", "connections",
           "dual writes during the migration", "a big-bang switch",
           "purge job in pg_cron", "we don't run celery in production"),
]

RULES = [
    ("never commit to main", "Never commit to main; work on a branch and open a PR"),
    ("indent with tabs", "Indent with tabs, not spaces, in every file you touch"),
    ("answer in French", "Answer in French when you talk to me (code and commits stay English)"),
    ("third_party/", "Never edit anything under third_party/, it is vendored"),
    ("no new dependencies", "Add no new dependencies to pyproject.toml"),
    ("ask before deleting", "Always ask before deleting a file"),
]
PEOPLE = ["@priya", "@marek", "@sofia.k", "@dmitri", "@amara"]
HOSTS = ["stg-eu-2.internal", "staging-7.corp.lan", "preprod-fra-1.int", "qa-box-3.local"]


# ---------------------------------------------------------------------------------------
# The abstract plan: turns of steps of actions, rendered later in a tool vocabulary
# ---------------------------------------------------------------------------------------


@dataclass
class Action:
    kind: str  # read | grep | shell | edit | write
    args: dict[str, Any]  # read: path; grep: pattern, path; shell: command; edit: path,
    output: str = ""  #      old, new; write: path, content
    exit_code: int = 0


@dataclass
class Step:
    text: str
    actions: list[Action]


@dataclass
class Turn:
    user: str
    steps: list[Step] = field(default_factory=list)
    reply: str = ""


@dataclass
class Plan:
    seed: int
    budget: int
    system: str
    turns: list[Turn]
    facts: list[Fact]
    guard: list[str]  # every key and stale value: filler never contains them
    probes: list[Fact] = field(default_factory=list)

    @property
    def scored(self) -> list[Fact]:
        """The 22 facts and the probes, as ``score`` takes them."""
        return [*self.facts, *self.probes]


SYSTEM_PROMPT = (
    "You are a coding agent working in a git repository on the user's machine. Use the "
    "tools to read, search, edit and run code. Keep answers short; show commands you run."
)


class Gen:
    """Seeded generator of one session plan of about ``budget`` estimated tokens."""

    def __init__(self, seed: int, budget: int) -> None:
        self.rng = random.Random(seed)
        self.seed, self.budget = seed, budget
        r = self.rng
        self.d = r.choice(DOMAINS)
        self.repo = r.choice(["atlas", "harbor", "quill", "meridian"])
        self.rules = r.sample(RULES, 4)
        self.sha = "".join(r.choice("0123456789abcdef") for _ in range(40))
        self.short = self.sha[:10]
        self.issue = f"{r.choice(['PLAT', 'OPS', 'CORE', 'DATA'])}-{r.randint(1000, 9899)}"
        self.port_stale, self.port_new = r.choice([("8080", "8443"), ("5000", "5443"),
                                                   ("3000", "3443")])
        self.redis_port = str(r.randint(16380, 16399))
        self.limit_stale, self.limit_new = r.choice([(60, 45), (120, 90), (500, 350)])
        self.envvar = f"{self.d.pkg.upper()}_{r.choice(['STORE_URL', 'BACKEND', 'DSN'])}"
        self.person = r.choice(PEOPLE)
        self.host = r.choice(HOSTS)
        self.todo1 = "CHANGELOG.md"
        self.file1 = f"src/{self.d.pkg}/{self.d.mod}.py"
        self.file2 = f"tests/{self.d.pkg}/test_{self.d.mod}_limits.py"
        self.test_file = f"tests/{self.d.pkg}/test_{self.d.mod}.py"
        d = self.d
        self.facts = [
            Fact("task", d.goal, "goal, first user message"),
            Fact("task", d.accept, "acceptance criterion, first user message"),
            *[Fact("rule", key, "ground rule, first user message") for key, _ in self.rules],
            Fact("correction", self.port_new, "service port, corrected at 42%",
                 stale=self.port_stale),
            Fact("correction", f"{self.limit_new} {d.noun}", "limit, corrected at 55%",
                 stale=f"{self.limit_stale} {d.noun}"),
            Fact("tool_id", self.short, "regression commit, from git log (18%)"),
            Fact("tool_id", self.issue, "issue id, from a grep of TODOs (30%)"),
            Fact("tool_id", self.redis_port, "redis port, from docker-compose.yml (52%)"),
            Fact("tool_id", self.envvar, "env var, from a stack trace (62%)"),
            Fact("user_fact", self.host, "staging host the user gave (6%)"),
            Fact("todo", self.todo1, "deferred by the user (27%)"),
            Fact("todo", self.person, "person to notify later (66%)"),
            Fact("decision", d.decision1, "approach chosen (35%)"),
            Fact("decision", d.decision2, "storage decision by the user (48%)"),
            Fact("file", self.file1, "edited (45%, 50%)"),
            Fact("file", self.file2, "created (70%)"),
            Fact("error_resolved", f"cannot import name '{d.cls}'", "fixed at 50%"),
            Fact("error_open", d.open_error, "failing test output (76%)"),
            Fact("back_ref", d.test, "the failing test the last message points to"),
        ]
        assert len(self.facts) == 22
        self.freeze = f"2027-{r.randint(1, 9):02d}-{r.randint(10, 28)}"
        self.rev = "".join(r.choice("0123456789abcdef") for _ in range(12))
        self.migration = f"alembic upgrade {self.rev}"
        self.read_only = f"config/{d.pkg}/{d.mod}_limits.toml"
        self.next_fn = f"_flush_{d.mod}_batches"
        self.ruled_out = r.choice(["gevent", "eventlet", "APScheduler", "django-q"])
        self.probes = [
            Fact("user_date", self.freeze, "release freeze date the user gave (15%)",
                 probe=True),
            Fact("command", self.migration, "migration command that ran (38%)", probe=True),
            Fact("file_read", self.read_only, "config file read, never changed (58%)",
                 probe=True),
            Fact("next_step", self.next_fn, "the next step the agent announced (86%)",
                 probe=True),
            Fact("rejected", self.ruled_out, "a library the user ruled out (40%)", probe=True),
        ]
        every = [*self.facts, *self.probes]
        self.guard = sorted({f.key for f in every} | {f.stale for f in every if f.stale}
                            | {self.sha})
        self._guard_re = re.compile("|".join(re.escape(g) for g in self.guard), re.I)
        self.tokens = 0

    # -- primitives ------------------------------------------------------------------
    def scrub(self, text: str) -> str:
        """Filler must never contain a fact's key: bump the last character of a match."""
        while True:
            m = self._guard_re.search(text)
            if not m:
                return text
            s = m.group(0)
            c = s[-1]
            c2 = str((int(c) + 1) % 10) if c.isdigit() else ("x" if c.lower() != "x" else "y")
            text = text[: m.start()] + s[:-1] + c2 + text[m.end():]

    def ident(self) -> str:
        return f"{self.rng.choice(VERBS)}_{self.rng.choice(NOUNS)}"

    def camel(self) -> str:
        return "".join(w.capitalize() for w in self.rng.sample(NOUNS, 2))

    def path(self) -> str:
        r = self.rng
        noun = r.choice([n for n in NOUNS if n != self.d.mod])
        kind = r.random()
        if kind < 0.6:
            return f"src/{self.d.pkg}/{noun}.py"
        if kind < 0.85:
            return f"tests/{self.d.pkg}/test_{noun}.py"
        return r.choice([f"docs/{noun}.md", f"config/{noun}.yaml", "pyproject.toml", "Makefile"])

    def size(self) -> int:
        """Heavy-tailed output size in lines."""
        x = self.rng.paretovariate(1.3)
        return int(min(700, 12 * x))

    def py_source(self, n_lines: int, cls: str | None = None) -> str:
        r = self.rng
        out = [f'"""{r.choice(NOUNS).capitalize()} {r.choice(VERBS)}ing for {self.repo}."""',
               "", "from __future__ import annotations", ""]
        out += [f"import {m}" for m in sorted(r.sample(STDLIB, r.randint(2, 5)))]
        out += [f"from {self.d.pkg}.{r.choice(NOUNS)} import {self.camel()}", "",
                "log = logging.getLogger(__name__)", ""]
        if cls:
            out += ["", "@dataclass", f"class {cls}:",
                    f'    """Keeps {r.choice(NOUNS)} state per {r.choice(NOUNS)}."""', ""]
            out += [f"    {f}: {r.choice(TYPES)}" for f in r.sample(FIELDS, 4)]
        while len(out) < n_lines:
            a, b = r.sample(NOUNS, 2)
            ret = r.choice(TYPES)
            out += ["", "", f"def {self.ident()}({a}: {r.choice(TYPES)}, *, {b}: int = "
                    f"{r.randint(1, 90)}) -> {ret}:",
                    f'    """{r.choice(VERBS).capitalize()} the {a} for the given {b}."""']
            for _ in range(r.randint(3, 12)):
                out.append(r.choice([
                    f"    if {a} is None:\n        raise ValueError(\"missing {a}\")",
                    f"    for item in {a}:\n        total += item.{r.choice(FIELDS)}",
                    f"    result = {self.ident()}({a}, timeout={r.randint(1, 30)})",
                    f"    log.debug(\"{r.choice(VERBS)} %s\", {a})",
                    f"    {b} = {{k: v for k, v in {a}.items() if v}}",
                    f"    # {r.choice(VERBS)} before {r.choice(VERBS)}ing the {r.choice(NOUNS)}",
                    f"    with open({a}.path, \"rb\") as fh:\n        data = fh.read()",
                ]))
            out.append(f"    return {r.choice([a, b, 'result', 'None', 'total', 'data'])}")
        return "\n".join(out[:n_lines]) + "\n"

    def test_names(self, n: int) -> list[str]:
        return [f"test_{self.ident()}" for _ in range(n)]

    def pytest_log(self, files: list[str] | None = None, failure: tuple[str, str, str, str]
                   | None = None, verbose: bool = False) -> tuple[str, int]:
        """A pytest run; ``failure`` = (file, test, assert line, error line)."""
        r = self.rng
        files = files or [f"tests/{self.d.pkg}/test_{n}.py" for n in
                          r.sample([n for n in NOUNS if n != self.d.mod], r.randint(3, 14))]
        out = ["=" * 29 + " test session starts " + "=" * 30,
               f"platform linux -- Python 3.11.{r.randint(4, 9)}, pytest-8.{r.randint(0, 3)}."
               f"{r.randint(0, 2)}, pluggy-1.5.0",
               f"rootdir: /home/dev/{self.repo}", "configfile: pyproject.toml",
               "plugins: anyio-4.4.0, cov-5.0.0, timeout-2.3.1"]
        body, total = [], 0
        for f in files:
            tests = self.test_names(r.randint(2, 30))
            total += len(tests)
            if verbose:
                body += [f"{f}::{t} PASSED" for t in tests]
            else:
                body.append(f"{f} " + "." * len(tests))
        if failure:
            total += 1
            ffile, ftest, fassert, ferr = failure
            body.append(f"{ffile} " + "." * r.randint(3, 9) + "F")
        out += [f"collected {total} items", "", *body, ""]
        if failure:
            out += ["=" * 35 + " FAILURES " + "=" * 35, f"{'_' * 20} {ftest} {'_' * 20}", "",
                    f"    def {ftest}(client, settings):",
                    f"        {self.ident()}(client, n={r.randint(2, 9)})",
                    f">       {fassert}", f"E       {ferr}", "",
                    f"{ffile}:{r.randint(20, 200)}: AssertionError",
                    "-" * 29 + " Captured log call " + "-" * 30,
                    f"DEBUG    {self.d.pkg}.{r.choice(NOUNS)}:{r.choice(NOUNS)}.py:"
                    f"{r.randint(10, 300)} {r.choice(VERBS)} {r.choice(NOUNS)}",
                    "=" * 27 + " short test summary info " + "=" * 28,
                    f"FAILED {ffile}::{ftest} - {ferr}",
                    f"{'=' * 20} 1 failed, {total - 1} passed in {r.uniform(2, 40):.2f}s "
                    f"{'=' * 20}"]
        else:
            out.append(f"{'=' * 25} {total} passed in {r.uniform(2, 40):.2f}s {'=' * 25}")
        return "\n".join(out), (1 if failure else 0)

    def git_log(self, n: int, plant: tuple[int, str] | None = None) -> str:
        r = self.rng
        out = []
        for i in range(n):
            name, mail = r.choice(AUTHORS)
            sha = "".join(r.choice("0123456789abcdef") for _ in range(40))
            subject = r.choice(COMMIT_SUBJECTS).format(n=r.choice(NOUNS),
                                                       v=f"{r.randint(1, 9)}.{r.randint(0, 20)}")
            if plant and plant[0] == i:
                sha, subject = self.sha, plant[1]
            day = 28 - i % 27
            out += [f"commit {sha}", f"Author: {name} <{mail}@{self.repo}.dev>",
                    f"Date:   Tue Nov {day:02d} {r.randint(8, 19):02d}:{r.randint(0, 59):02d}:"
                    f"{r.randint(0, 59):02d} 2026 +0100", "", f"    {subject}", ""]
        return "\n".join(out)

    def grep_out(self, pattern: str, n: int) -> str:
        r = self.rng
        return "\n".join(f"{self.path()}:{r.randint(1, 400)}:    {r.choice(['', 'return '])}"
                         f"{pattern}({r.choice(NOUNS)}, {r.choice(NOUNS)})" for _ in range(n))

    def diff(self, path: str, n: int) -> str:
        r = self.rng
        out = [f"diff --git a/{path} b/{path}", f"index {r.getrandbits(28):07x}..."
               f"{r.getrandbits(28):07x} 100644", f"--- a/{path}", f"+++ b/{path}"]
        for _ in range(max(1, n // 8)):
            out.append(f"@@ -{r.randint(1, 300)},7 +{r.randint(1, 300)},8 @@ def {self.ident()}(")
            for _ in range(7):
                sign = r.choice([" ", " ", " ", "-", "+"])
                out.append(f"{sign}    {self.ident()}({r.choice(NOUNS)})")
        return "\n".join(out)

    def lint_out(self, n: int) -> str:
        r = self.rng
        codes = ["F401 `{m}` imported but unused", "E501 Line too long (104 > 100)",
                 "B006 Do not use mutable data structures for argument defaults",
                 "UP007 Use `X | Y` for type annotations", "SIM108 Use ternary operator"]
        lines = [f"{self.path()}:{r.randint(1, 400)}:{r.randint(1, 80)}: "
                 + r.choice(codes).format(m=r.choice(STDLIB)) for _ in range(n)]
        return "\n".join([*lines, f"Found {n} errors.", "[*] 2 fixable with the `--fix` option."])

    def mypy_out(self, n: int) -> str:
        r = self.rng
        lines = [f"{self.path()}:{r.randint(1, 400)}: error: Argument 1 to \"{self.ident()}\" "
                 f"has incompatible type \"{r.choice(TYPES)}\"; expected \"{r.choice(TYPES)}\"  "
                 "[arg-type]" for _ in range(n)]
        return "\n".join([*lines, f"Found {n} errors in {max(1, n // 3)} files (checked "
                          f"{r.randint(80, 200)} source files)"])

    def traceback(self, last: str, frame: str | None = None) -> str:
        r = self.rng
        out = ["Traceback (most recent call last):"]
        for _ in range(r.randint(3, 9)):
            out += [f'  File "/home/dev/{self.repo}/{self.path()}", line {r.randint(5, 500)}, '
                    f"in {self.ident()}", f"    {self.ident()}({r.choice(NOUNS)})"]
        if frame:
            out.append(frame)
        return "\n".join([*out, last])

    # -- filler ---------------------------------------------------------------------
    def filler_action(self) -> Action:
        r = self.rng
        x = r.random()
        n = self.size()
        if x < 0.30:
            p = self.path()
            return Action("read", {"path": p}, self.scrub(self.py_source(max(8, n))))
        if x < 0.45:
            pat = self.ident()
            return Action("grep", {"pattern": pat, "path": "src"},
                          self.scrub(self.grep_out(pat, max(1, n // 4))))
        if x < 0.62:
            out, code = self.pytest_log(verbose=r.random() < 0.3)
            cmd = r.choice(["pytest -q", f"pytest -q tests/{self.d.pkg}", "python -m pytest -x"])
            return Action("shell", {"command": cmd}, self.scrub(out), code)
        if x < 0.70:
            return Action("shell", {"command": f"git log -n {max(3, n // 6)}"},
                          self.scrub(self.git_log(max(3, n // 6))))
        if x < 0.77:
            p = self.path()
            return Action("shell", {"command": f"git diff {p}"}, self.scrub(self.diff(p, n)))
        if x < 0.83:
            k = max(1, n // 5)
            return Action("shell", {"command": "ruff check ."}, self.scrub(self.lint_out(k)), 1)
        if x < 0.87:
            k = max(1, n // 6)
            return Action("shell", {"command": "mypy src"}, self.scrub(self.mypy_out(k)), 1)
        if x < 0.90:
            return Action("shell", {"command": f"python -m {self.d.pkg}.{r.choice(NOUNS)}"},
                          self.scrub(self.traceback(f"ValueError: invalid {r.choice(NOUNS)} "
                                                    f"{r.randint(1, 99)!r}")), 1)
        if x < 0.94:
            p = self.path()
            old = f"    {self.ident()}({r.choice(NOUNS)})"
            return Action("edit", {"path": p, "old": self.scrub(old),
                                   "new": self.scrub(old.replace("(", "(\n\t\t", 1))})
        ls = "\n".join(f"-rw-r--r--  1 dev dev {r.randint(200, 90000):>6} Nov {r.randint(1, 28):2d}"
                       f" 10:{r.randint(10, 59)} {r.choice(NOUNS)}.py"
                       for _ in range(max(3, n // 3)))
        return Action("shell", {"command": f"ls -la src/{self.d.pkg}"}, self.scrub(ls))

    def filler_step(self) -> Step:
        r = self.rng
        k = r.choice([1, 1, 1, 1, 2, 2, 3])
        text = r.choice(STEP_TEXTS).format(p=self.path(), f=self.ident())
        return Step(self.scrub(text), [self.filler_action() for _ in range(k)])

    def filler_turn(self) -> Turn:
        r = self.rng
        if r.random() < 0.65:
            user = r.choice(FILLER_USER)
        else:
            user = r.choice(SIDE_REQUESTS).format(t=f"test_{self.ident()}", p=self.path(),
                                                  f=self.ident(), n=r.choice(NOUNS))
        steps = [self.filler_step() for _ in range(r.choice([1, 1, 2, 2, 3, 3, 4, 5, 6, 8]))]
        reply = r.choice(REPLIES).format(f=self.ident(), p=self.path(), n=r.choice(NOUNS))
        return Turn(self.scrub(user), steps, self.scrub(reply))

    # -- planted events -------------------------------------------------------------
    def events(self) -> list[tuple[float, Callable[[], list[Turn]]]]:
        d, r = self.d, self.rng

        def start() -> list[Turn]:
            rules = ". ".join(text for _, text in self.rules)
            user = (f"Hi! In {self.repo}, please {d.goal}. Acceptance: {d.accept}; the tests "
                    f"for it go in {self.test_file}. Ground rules for this whole session: "
                    f"{rules}.")
            steps = [Step("Je commence par regarder le dépôt.", [
                Action("shell", {"command": "git status && ls"},
                       self.scrub(f"On branch feature/{d.mod}-work\nnothing to commit, working "
                                  "tree clean\nMakefile\nREADME.md\nconfig\ndocs\npyproject.toml"
                                  "\nsrc\ntests\nthird_party"))]),
                self.filler_step()]
            return [Turn(user, steps, "J'ai une vue d'ensemble du dépôt ; je continue.")]

        def user_fact() -> list[Turn]:
            out = self.scrub("\n".join(f"{self.d.pkg}-{n}.service loaded active running"
                                       for n in r.sample(NOUNS, 6)))
            return [Turn(f"fyi the staging host is {self.host}, you can ssh there if needed",
                         [Step("", [Action("shell", {"command": f"ssh {self.host} "
                                                     "systemctl list-units --type=service"},
                                           out)])],
                         "Compris, l'hôte de staging répond.")]

        def stale_port() -> list[Turn]:
            return [Turn(f"the service listens on port {self.port_stale} in dev",
                         [Step("", [Action("shell",
                                           {"command": f"curl -s localhost:{self.port_stale}"
                                                       "/healthz"},
                                           "curl: (7) Failed to connect: Connection refused", 7)])],
                         "La connexion est refusée ; le service n'est peut-être pas lancé.")]

        def stale_limit() -> list[Turn]:
            return [Turn(f"the limit should be {self.limit_stale} {d.noun} per minute by default",
                         [self.filler_step()], "D'accord, je le note.")]

        def sha() -> list[Turn]:
            log = self.git_log(24, plant=(r.randint(5, 18), f"refactor {d.mod} window math"))
            show = self.scrub(self.diff(self.path(), 30))
            return [Turn(r.choice(FILLER_USER), [
                Step("When did this break? Looking at the history.",
                     [Action("shell", {"command": f"git log -n 24 -- src/{d.pkg}"},
                             self.scrub_except(log, self.sha))]),
                Step("That refactor looks suspicious.",
                     [Action("shell", {"command": f"git show {self.short} --stat -p"}, show)]),
            ], "Le problème vient de ce refactor ; je regarde la suite.")]

        def todo1() -> list[Turn]:
            return [Turn(f"later we also need to update the {self.todo1}, don't do it now",
                         [self.filler_step()], "Noté, je garde ça pour la fin.")]

        def issue() -> list[Turn]:
            hits = self.scrub(self.grep_out("TODO", 14)).split("\n")
            hits.insert(r.randint(2, 10), f"{self.file1}:{r.randint(40, 160)}:    # TODO("
                        f"{self.issue}): the window must reset per tenant")
            body = (f"title: {d.mod} window never resets for some tenants\nstate: OPEN\n"
                    f"labels: bug, {d.pkg}\n--\n" + self.scrub(
                        f"Seen in prod since the {r.choice(NOUNS)} rollout."))
            return [Turn(r.choice(FILLER_USER), [
                Step("Looking for known TODOs around this code.",
                     [Action("grep", {"pattern": "TODO", "path": f"src/{d.pkg}"},
                             "\n".join(hits))]),
                Step("", [Action("shell", {"command": f"gh issue view {self.issue}"}, body)]),
            ], "Il y a déjà un ticket ouvert pour ce comportement.")]

        def decision1() -> list[Turn]:
            return [
                Turn(r.choice(FILLER_USER), [self.filler_step()],
                     f"Deux options : {d.decision1_alt} ou {d.decision1}. Je propose "
                     f"{d.decision1}, plus robuste. On part là-dessus ?"),
                Turn(f"ok, go with the {d.decision1}", [self.filler_step()], "Entendu."),
            ]

        def correct_port() -> list[Turn]:
            return [Turn(f"actually the port is {self.port_new}, not {self.port_stale}",
                         [Step("", [Action("shell", {"command": f"curl -sk https://localhost:"
                                                                f"{self.port_new}/healthz"},
                                           '{"status": "ok"}')])],
                         "Ça répond sur ce port.")]

        def file1() -> list[Turn]:
            src = self.scrub(self.py_source(160, cls=d.cls))
            return [Turn(r.choice(FILLER_USER), [
                Step("", [Action("read", {"path": self.file1}, src)]),
                Step("", [Action("edit", {"path": self.file1, "old": "    return result",
                                          "new": "\treturn self._refill(result)"})]),
            ], "J'ai modifié le module principal.")]

        def decision2() -> list[Turn]:
            return [Turn(f"keep the {d.decision2}, {d.decision2_why}",
                         [self.filler_step()], "D'accord.")]

        def error_resolved() -> list[Turn]:
            tb = self.traceback(f"ImportError: cannot import name '{d.cls}' from "
                                f"'{d.pkg}.{d.mod}' (/home/dev/{self.repo}/{self.file1})")
            out = ("=" * 29 + " test session starts " + "=" * 30 + "\ncollected 0 items / 1 "
                   f"error\n\n==================================== ERRORS ====================="
                   f"===============\n_______ ERROR collecting {self.test_file} _______\n"
                   + self.scrub_except(tb, f"cannot import name '{d.cls}'", self.file1))
            passed, _ = self.pytest_log()
            return [Turn(r.choice(FILLER_USER), [
                Step("", [Action("shell", {"command": f"pytest -q {self.test_file}"}, out, 2)]),
                Step("The class was renamed; restoring the export.",
                     [Action("edit", {"path": self.file1, "old": "class _Store:",
                                      "new": f"class {d.cls}:"})]),
                Step("", [Action("shell", {"command": f"pytest -q {self.test_file}"},
                                 self.scrub(passed))]),
            ], "L'erreur d'import est corrigée, les tests passent.")]

        def redis_port() -> list[Turn]:
            compose = (f"services:\n  app:\n    build: .\n    env_file: .env\n  redis:\n"
                       f"    image: redis:7.2\n    ports:\n      - \"{self.redis_port}:6379\"\n"
                       "  db:\n    image: postgres:16\n    ports:\n      - \"15432:5432\"\n")
            return [Turn(r.choice(FILLER_USER), [
                Step("", [Action("read", {"path": "docker-compose.yml"}, compose)]),
                Step("", [Action("shell", {"command": f"redis-cli -p {self.redis_port} ping"},
                                 "PONG")]),
            ], "Redis tourne en local.")]

        def correct_limit() -> list[Turn]:
            return [Turn(f"sorry, I misspoke earlier: make it {self.limit_new} {d.noun} per "
                         f"minute, not {self.limit_stale} {d.noun}", [self.filler_step()],
                         "C'est noté.")]

        def envvar() -> list[Turn]:
            frame = (f'  File "/home/dev/{self.repo}/src/{d.pkg}/settings.py", line 17, in load'
                     f'\n    backend = os.environ["{self.envvar}"]')
            tb = self.scrub_except(self.traceback(f"KeyError: '{self.envvar}'", frame),
                                   self.envvar)
            return [Turn(r.choice(FILLER_USER), [
                Step("", [Action("shell", {"command": f"python -m {d.pkg}.app --check"}, tb, 1)]),
                Step("", [Action("shell", {"command": f"{self.envvar}=redis python -m "
                                                      f"{d.pkg}.app --check"}, "config ok")]),
            ], "Il manquait une variable d'environnement ; ça passe.")]

        def todo2() -> list[Turn]:
            return [Turn(f"once this lands we should tell {self.person} about the migration, "
                         "remind me", [self.filler_step()], "Je vous le rappellerai.")]

        def file2() -> list[Turn]:
            content = self.scrub(self.py_source(60))
            return [Turn(r.choice(FILLER_USER), [
                Step("Adding the limit tests in a new file.",
                     [Action("write", {"path": self.file2, "content": content})]),
            ], "Nouveau fichier de tests ajouté.")]

        def error_open() -> list[Turn]:
            log, code = self.pytest_log(failure=(self.test_file, d.test, d.assert_line,
                                                 d.open_error))
            body = self.scrub_except(log, d.test, d.open_error, self.test_file)
            return [
                Turn(r.choice(FILLER_USER), [
                    Step("", [Action("shell", {"command": f"pytest -q tests/{d.pkg}"}, body,
                                     code)])],
                    "Il reste un test en échec ; je m'en occupe ensuite."),
                Turn("leave that for now, first look at why CI is so slow",
                     [self.filler_step(), self.filler_step()], "Je regarde la CI."),
            ]

        # -- the category probes (``PROBE_KINDS``) --
        def freeze() -> list[Turn]:
            return [Turn(f"heads-up: the release freeze starts on {self.freeze}, this has to "
                         "land before", [self.filler_step()], "Compris, je vise avant le gel.")]

        def migration() -> list[Turn]:
            out = (f"INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\n"
                   f"INFO  [alembic.runtime.migration] Running upgrade -> {self.rev}, add "
                   f"{d.mod} tenant column")
            return [Turn(r.choice(FILLER_USER), [
                Step("Applying the schema migration first.",
                     [Action("shell", {"command": self.migration}, out)])],
                "La migration est appliquée.")]

        def ruled_out() -> list[Turn]:
            return [Turn(f"and whatever you do, don't bring in {self.ruled_out}: it deadlocked "
                         "in prod last spring", [self.filler_step()], "D'accord, je l'évite.")]

        def read_only() -> list[Turn]:
            toml = (f"[{d.mod}]\nwindow_seconds = 60\nburst = 20\n\n[{d.mod}.overrides]\n"
                    f"enterprise = 4\n")
            return [Turn(r.choice(FILLER_USER), [
                Step("Checking the configured limits.",
                     [Action("read", {"path": self.read_only}, toml)])],
                "Les limites configurées sont cohérentes.")]

        def next_step() -> list[Turn]:
            return [Turn(r.choice(FILLER_USER), [self.filler_step()],
                         f"Prochaine étape : profiler {self.next_fn} dans {self.file1}, "
                         "c'est là que la CI perd du temps.")]

        return [(0.0, start), (0.06, user_fact), (0.08, stale_port), (0.12, stale_limit),
                (0.15, freeze), (0.18, sha), (0.27, todo1), (0.30, issue), (0.35, decision1),
                (0.38, migration), (0.40, ruled_out),
                (0.42, correct_port), (0.45, file1), (0.48, decision2), (0.50, error_resolved),
                (0.52, redis_port), (0.55, correct_limit), (0.58, read_only), (0.62, envvar),
                (0.66, todo2), (0.70, file2), (0.76, error_open), (0.86, next_step)]

    def scrub_except(self, text: str, *allowed: str) -> str:
        """Scrub ``text`` but keep the planted strings ``allowed``."""
        marks = {a: f"\x00{i}\x00" for i, a in enumerate(allowed)}
        for a, m in marks.items():
            text = text.replace(a, m)
        text = self.scrub(text)
        for a, m in marks.items():
            text = text.replace(m, a)
        return text

    def plan(self) -> Plan:
        turns: list[Turn] = []
        pending = deque(self.events())
        while self.tokens < self.budget * 0.97 or pending:
            if pending and pending[0][0] * self.budget <= self.tokens:
                new = pending.popleft()[1]()
            else:
                new = [self.filler_turn()]
            for t in new:
                self.tokens += COUNTER.count_messages(render_turn(t, "native"))
            turns += new
        turns.append(Turn("now go back to the failing test from before and keep to my rules"))
        return Plan(self.seed, self.budget, SYSTEM_PROMPT, turns, self.facts, self.guard,
                    self.probes)


def make_plan(seed: int, budget: int) -> Plan:
    return Gen(seed, budget).plan()


# ---------------------------------------------------------------------------------------
# Rendering: the same plan in a tool vocabulary, with id and usage styles
# ---------------------------------------------------------------------------------------

VOCABS = ("native", "claude", "codex", "pi")


def numbered(text: str, arrow: bool = False) -> str:
    sep = "→" if arrow else "\t"
    return "\n".join(f"{i:>6}{sep}{line}" for i, line in enumerate(text.split("\n"), 1))


def render_action(a: Action, vocab: str) -> tuple[str, dict[str, Any], str]:
    """(tool name, arguments, result text) of an action in a vocabulary."""
    g, k = a.args, a.kind
    fail = f"\n\nexit code {a.exit_code}" if a.exit_code else ""
    if vocab == "native":
        if k == "read":
            return "read", {"path": g["path"]}, numbered(a.output)
        if k == "grep":
            return "grep", {"pattern": g["pattern"], "path": g["path"]}, a.output
        if k == "shell":
            return "shell", {"command": g["command"]}, a.output + fail
        if k == "edit":
            return ("edit", {"path": g["path"], "old_string": g["old"], "new_string": g["new"]},
                    f"Edited {g['path']}: 1 replacement.")
        return ("write", {"path": g["path"], "content": g["content"]},
                f"Wrote {g['content'].count(chr(10))} lines to {g['path']}.")
    if vocab == "claude":
        root = "/home/dev/repo/"
        if k == "read":
            return "Read", {"file_path": root + g["path"]}, numbered(a.output, arrow=True)
        if k == "grep":
            return ("Grep", {"pattern": g["pattern"], "path": g["path"], "output_mode": "content",
                             "-n": True}, a.output)
        if k == "shell":
            out = f"Error: Exit code {a.exit_code}\n{a.output}" if a.exit_code else a.output
            return "Bash", {"command": g["command"], "description": "Run command"}, out
        if k == "edit":
            return ("Edit", {"file_path": root + g["path"], "old_string": g["old"],
                             "new_string": g["new"]},
                    f"The file {root + g['path']} has been updated. Here's the result of "
                    f"running `cat -n` on a snippet of the edited file:\n"
                    + numbered(g["new"], arrow=True))
        return ("Write", {"file_path": root + g["path"], "content": g["content"]},
                f"File created successfully at: {root + g['path']}")
    if vocab == "codex":
        def sh(cmd: str, out: str, code: int = 0) -> tuple[str, dict[str, Any], str]:
            res = json.dumps({"output": out, "metadata": {"exit_code": code,
                                                         "duration_seconds": 0.4}},
                             ensure_ascii=False)
            return "shell", {"command": ["bash", "-lc", cmd], "workdir": "/home/dev/repo",
                             "timeout_ms": 120000}, res
        if k == "read":
            return sh(f"sed -n '1,400p' {g['path']}", a.output)
        if k == "grep":
            return sh(f"rg -n '{g['pattern']}' {g['path']}", a.output)
        if k == "shell":
            return sh(g["command"], a.output, a.exit_code)
        if k == "edit":
            old = "\n".join("-" + x for x in g["old"].split("\n"))
            new = "\n".join("+" + x for x in g["new"].split("\n"))
            patch = (f"*** Begin Patch\n*** Update File: {g['path']}\n@@\n{old}\n{new}\n"
                     "*** End Patch")
            return ("apply_patch", {"input": patch},
                    f"Success. Updated the following files:\nM {g['path']}")
        body = "\n".join("+" + x for x in g["content"].split("\n"))
        patch = f"*** Begin Patch\n*** Add File: {g['path']}\n{body}\n*** End Patch"
        return ("apply_patch", {"input": patch},
                f"Success. Updated the following files:\nA {g['path']}")
    # pi
    if k == "read":
        return "read", {"path": g["path"]}, a.output
    if k == "grep":
        return "bash", {"command": f"rg -n '{g['pattern']}' {g['path']}"}, a.output
    if k == "shell":
        return "bash", {"command": g["command"]}, a.output + fail
    if k == "edit":
        return ("edit", {"path": g["path"], "oldText": g["old"], "newText": g["new"]},
                f"Successfully replaced text in {g['path']}.")
    return ("write", {"path": g["path"], "content": g["content"]},
            f"Successfully wrote {len(g['content'])} bytes to {g['path']}")


_ID_ALPHABET = string.ascii_letters + string.digits


def render_turn(turn: Turn, vocab: str, id_style: str = "unique",
                rng: random.Random | None = None) -> list[Message]:
    """The messages of one turn. ``id_style="reused"``: ids restart at call_0 every step."""
    rng = rng or random.Random(0)
    out = [Message.user(turn.user)]
    for step in turn.steps:
        calls, results = [], []
        for j, a in enumerate(step.actions):
            name, args, res = render_action(a, vocab)
            if id_style == "reused":
                cid = f"call_{j}"
            elif vocab in ("claude", "pi"):
                cid = "toolu_01" + "".join(rng.choice(_ID_ALPHABET) for _ in range(22))
            else:
                cid = "call_" + "".join(rng.choice(_ID_ALPHABET) for _ in range(24))
            calls.append(ToolCall(id=cid, name=name, arguments=args))
            results.append(Message.tool(res, tool_call_id=cid, name=name,
                                        is_error=bool(a.exit_code)))
        out.append(Message.assistant(step.text, tool_calls=calls))
        out += results
    if turn.reply:
        out.append(Message.assistant(turn.reply))
    return out


def render(plan: Plan, vocab: str = "native", *, id_style: str = "unique",
           usage: float | None = None) -> list[Message]:
    """The whole session as messages; ``usage``: set provider usage at that multiple of the
    estimate on every assistant message (input = the prompt before it, output = itself)."""
    rng = random.Random(plan.seed)
    msgs = [Message.system(plan.system)]
    for t in plan.turns:
        msgs += render_turn(t, vocab, id_style=id_style, rng=rng)
    if usage is not None:
        total = 0
        for i, m in enumerate(msgs):
            own = COUNTER.count_message(m)
            if m.role == "assistant":
                inp, outp = round(total * usage), round(own * usage)
                msgs[i] = Message.assistant(m.content or "", tool_calls=m.tool_calls,
                                            usage=Usage(input=inp, output=outp,
                                                        total=inp + outp))
            total += own
    return msgs


# ---------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------


def context_text(msgs: Sequence[Message]) -> list[str]:
    """Lowercased text of each message, tool-call names and arguments included."""
    out = []
    for m in msgs:
        parts = [m.text]
        parts += [t.thinking for t in m.thinking]
        for c in m.tool_calls or ():
            parts.append(c.name + " " + json.dumps(c.arguments, ensure_ascii=False))
        out.append("\n".join(parts).lower())
    return out


def stale_shown(texts: list[str], new: str, stale: str, near: int = 120) -> bool:
    """The stale value is shown as current: it appears after the last mention of the new
    value without the new value within ``near`` characters (or the new value is gone)."""
    blob = "\n\x00\n".join(texts)
    new, stale = new.lower(), stale.lower()
    last_new = blob.rfind(new)
    for m in re.finditer(re.escape(stale), blob):
        if blob.find(new, max(0, m.start() - near), m.end() + near) != -1:
            continue
        if last_new == -1 or m.start() > last_new:
            return True
    return False


@dataclass
class Score:
    kept: dict[str, list[bool]]  # kind -> kept flags (the 22 facts)
    stale: int  # corrections whose stale value is shown as current
    missing: list[str]
    probes: dict[str, list[bool]] = field(default_factory=dict)  # kind -> kept (probes)

    def category(self, kinds: Sequence[str]) -> list[bool]:
        """The kept flags of the facts and probes of ``kinds``."""
        return [f for kind in kinds for f in [*self.kept.get(kind, []),
                                              *self.probes.get(kind, [])]]

    @property
    def total(self) -> tuple[int, int]:
        flags = [f for v in self.kept.values() for f in v]
        return sum(flags), len(flags)


def score(msgs: Sequence[Message], facts: Sequence[Fact]) -> Score:
    texts = context_text(msgs)
    blob = "\n".join(texts)
    kept: dict[str, list[bool]] = defaultdict(list)
    probes: dict[str, list[bool]] = defaultdict(list)
    stale, missing = 0, []
    for f in facts:
        ok = f.key.lower() in blob
        (probes if f.probe else kept)[f.kind].append(ok)
        if not ok and not f.probe:
            missing.append(f"{f.kind}:{f.key}")
        if f.stale and stale_shown(texts, f.key, f.stale):
            stale += 1
    return Score(dict(kept), stale, missing, dict(probes))


def pairing_ok(msgs: Sequence[Message]) -> tuple[bool, str]:
    """Every tool result directly follows the assistant message whose calls include its id
    (results of one message may come in any order), and every call has one result."""
    pending: list[str] | None = None
    for i, m in enumerate(msgs):
        if m.role == "tool":
            if pending is None or m.tool_call_id not in pending:
                return False, f"tool result {m.tool_call_id!r} at {i} has no open call"
            pending.remove(m.tool_call_id)
            continue
        if pending:
            return False, f"calls {pending} unanswered before message {i}"
        pending = [c.id for c in m.tool_calls] if m.role == "assistant" and m.tool_calls else None
    if pending:
        return False, f"calls {pending} unanswered at the end"
    return True, ""


# ---------------------------------------------------------------------------------------
# The scripted summarizer ("a decent LLM", kept simple)
# ---------------------------------------------------------------------------------------

SUMMARY_HEAD = "Summary so far (scripted)."
_ROLE = re.compile(r"^\s*(?:\[|#+\s*|\*\*)?(user|human|assistant|tool[^\]\n:]*|system)"
                   r"\b[^\n]{0,40}?(?:\]|:|\*\*)\s*$", re.I | re.M)
_IDS = [
    re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"),  # shas
    re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{2,6}\b"),  # issue ids
    re.compile(r"(?:port |-p |localhost:|\")(\d{4,5})\b"),  # ports
    re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"),  # env vars
    re.compile(r"(?<![\w@])@[a-z][\w.]*[a-z]"),  # handles
]
_PATH = re.compile(r"(?<![\w/])(?:[\w.-]+/)+[\w.-]+\.(?:py|md|toml|ya?ml|json|cfg|txt)\b")
_ERR = re.compile(r"^(?:E\s+)?(?:FAILED .*|\w*(?:Error|Exception): .*)$", re.M)
_FILLER = {w.lower() for w in FILLER_USER}


def scripted_summary(messages: Sequence[Message]) -> str:
    """A summary like a decent LLM would write from the prompt it is given, kept simple:
    what the user said (verbatim up to 1,500 characters each, the first 20 and last 40
    messages; filler such as "ok, continue" skipped), the last few things the assistant
    said, the last errors seen, every sha / issue id / port / env var / handle that
    appears, and the 25 paths mentioned most often. It follows no section list and reads
    the transcript only through role markers such as "[user]". A previous summary of its
    own found in the input is carried forward, so summaries of summaries keep what the
    first ones had."""
    text = "\n".join(m.text for m in messages if m.role != "system")
    carried: list[str] = []
    if SUMMARY_HEAD in text:
        tail = text[text.find(SUMMARY_HEAD) + len(SUMMARY_HEAD):]
        carried = [ln for ln in tail.split("\n") if ln.startswith("- ")][:200]
    blocks: list[tuple[str, str]] = []
    marks = list(_ROLE.finditer(text))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        blocks.append((m.group(1).lower(), text[m.end():end].strip()))
    users = [b for r, b in blocks if r in ("user", "human")
             and b.strip().lower() not in _FILLER and SUMMARY_HEAD not in b]
    said = [b for r, b in blocks if r == "assistant" and b and len(b) < 400][-4:]
    errors = list(dict.fromkeys(_ERR.findall(text)))[-8:]
    ids: list[str] = []
    for rx in _IDS:
        ids += [m.group(m.lastindex or 0) for m in rx.finditer(text)]
    ids = list(dict.fromkeys(ids))[-80:]
    paths = [p for p, _ in Counter(_PATH.findall(text)).most_common(25)]
    users = users[:20] + users[-40:] if len(users) > 60 else users
    lines = [f"- The user said: {u[:1500]}" for u in users]
    lines += [f"- The assistant said: {s[:200]}" for s in said]
    lines += [f"- Error seen: {e[:200]}" for e in errors]
    if ids:
        lines.append("- Identifiers: " + ", ".join(ids))
    if paths:
        lines.append("- Files: " + ", ".join(paths))
    merged = list(dict.fromkeys([*carried, *lines]))
    return "\n".join([SUMMARY_HEAD, *merged])[:24_000]


def summarizer() -> ScriptedModel:
    return ScriptedModel(itertools.repeat(scripted_summary), name="scripted-summarizer")


# ---------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------

CONFIGS: list[tuple[str, Callable[[], CompactionLadder]]] = [
    ("ToolResults", lambda: CompactionLadder([ToolResults()])),
    ("SlidingWin", lambda: CompactionLadder([SlidingWindow()])),
    ("Digest", lambda: CompactionLadder([Digest()])),
    ("Summarize", lambda: CompactionLadder([Summarize(summarizer())])),
    ("default", lambda: default_ladder()),
    ("default+LLM", lambda: default_ladder(model=summarizer())),
]
RATIOS = (0.5, 0.2, 0.1)


@dataclass
class Run:
    label: str
    ratio: float
    score: Score
    after_ratio: float  # EstimateCounter(after) * scale / target
    est_ratio: float  # EstimateCounter(after) / target
    pairing: bool
    seconds: float
    written: bool
    note: str = ""
    stages: str = ""


def session_of(msgs: Sequence[Message]) -> Session:
    s = Session.in_memory()
    with s.batch():
        for m in msgs:
            s.append_message(m)
    return s


def one_shot(msgs: Sequence[Message], facts: Sequence[Fact], label: str,
             ladder: CompactionLadder, ratio: float, scale: float = 1.0) -> Run:
    """Compact once so that the target is ``ratio`` of the session's tokens. ``scale``: the
    provider counts ``scale`` x the estimate (usage scenario), so the window is scaled too."""
    s = session_of(msgs)
    tokens = COUNTER.count_messages(s.build_context().messages)
    window = round(tokens * scale)
    t0 = time.perf_counter()
    try:
        res = s.compact(window, ladder=ladder, compact_at=0.95, compact_to=ratio,
                        counter=EstimateCounter(), force=True)
        err = ""
    except Exception as e:  # a stage that fails is a figure too
        res, err = None, f"{type(e).__name__}: {e}"
    dt = time.perf_counter() - t0
    ctx = s.build_context().messages
    target = res.target if res is not None else window * ratio
    est = COUNTER.count_messages(ctx)
    ok, why = pairing_ok(ctx)
    note = err or (res.reason if res is not None and res.entry_id is None else "") or why
    stages = "+".join(STAGE_ABBR.get(x.name, x.name[:4]) for x in res.stages
                      if x.applied) if res is not None else ""
    return Run(label, ratio, score(ctx, facts), est * scale / target, est / target, ok, dt,
               res is not None and res.entry_id is not None, note, stages or "-")


STAGE_ABBR = {"tool_results": "TR", "sliding_window": "SW", "summarize": "SU", "digest": "DG"}


def fmt_kept(flags: list[bool]) -> str:
    return f"{sum(flags)}/{len(flags)}"


def print_table(title: str, runs: list[Run], facts: Sequence[Fact], headers: list[str],
                scaled: bool = False) -> None:
    print(f"\n{title}")
    counts = Counter(f.kind for f in facts)
    w0 = 24
    widths = [max(11, len(h) + 1) for h in headers]
    line = f"{'':{w0}}" + "".join(f"{h:>{w}}" for h, w in zip(headers, widths, strict=True))
    print(line)
    print("-" * len(line))
    for kind, label in KINDS:
        row = [fmt_kept(r.score.kept.get(kind, [])) for r in runs]
        print(f"{label + f' ({counts[kind]})':{w0}}" + "".join(
            f"{c:>{w}}" for c, w in zip(row, widths, strict=True)))
    for kind, label in PROBE_KINDS:
        row = [fmt_kept(r.score.probes.get(kind, [])) for r in runs]
        print(f"{'probe: ' + label:{w0}}" + "".join(
            f"{c:>{w}}" for c, w in zip(row, widths, strict=True)))
    cells = []
    for r in runs:
        k, n = r.score.total
        cells.append(f"{k}/{n} {100 * k / n:.0f}%")
    print(f"{'all facts':{w0}}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths,
                                                                      strict=True)))
    rows = [("stale shown as current", [str(r.score.stale) for r in runs]),
            ("tokens after / target", [f"{r.est_ratio:.2f}" for r in runs])]
    if scaled:
        rows.append(("  x provider scale", [f"{r.after_ratio:.2f}" for r in runs]))
    rows += [("pairing ok", ["yes" if r.pairing else "NO" for r in runs]),
             ("entry written", ["yes" if r.written else "no" for r in runs]),
             ("stages applied", [r.stages for r in runs]),
             ("seconds", [f"{r.seconds:.3f}" for r in runs])]
    for label, row in rows:
        print(f"{label:{w0}}" + "".join(f"{c:>{w}}" for c, w in zip(row, widths, strict=True)))
    notes = [f"{h}: {r.note}" for h, r in zip(headers, runs, strict=True) if r.note]
    for n in notes:
        print(f"  note {n[:150]}")


# -- (c) the agent loop --------------------------------------------------------------


def replay_tools(plan: Plan) -> list[ct.Tool]:
    """Tools named like contextree's own that return the planned outputs in call order."""
    queues: dict[str, deque[str]] = defaultdict(deque)
    for t in plan.turns:
        for s in t.steps:
            for a in s.actions:
                name, _, res = render_action(a, "native")
                queues[name].append(res)

    def pop(name: str) -> str:
        return queues[name].popleft() if queues[name] else f"{name}: no planned output"

    @ct.tool(name="read")
    def read(path: str) -> str:
        """Read a file."""
        return pop("read")

    @ct.tool(name="grep")
    def grep(pattern: str, path: str = ".") -> str:
        """Search files for a pattern."""
        return pop("grep")

    @ct.tool(name="shell")
    def shell(command: str) -> str:
        """Run a shell command."""
        return pop("shell")

    @ct.tool(name="edit")
    def edit(path: str, old_string: str, new_string: str) -> str:
        """Replace text in a file."""
        return pop("edit")

    @ct.tool(name="write")
    def write(path: str, content: str) -> str:
        """Write a file."""
        return pop("write")

    return [read, grep, shell, edit, write]


@dataclass
class LoopRun:
    label: str
    score: Score
    compactions: int
    failed: int
    after_ratios: list[float]
    calls: int
    pairing_bad: int
    tokens_final: int
    seconds: float
    stages: str
    summarizer_calls: int


def agent_loop(plan: Plan, window: int, with_model: bool) -> LoopRun:
    """Drive the plan through the runtime: one ``agent.start`` per user turn, the scripted
    model replays the planned steps, compaction runs before every model call."""
    replies: list[Message] = []
    rng = random.Random(plan.seed)
    for t in plan.turns:
        msgs = render_turn(t, "native", rng=rng)
        replies += [m for m in msgs if m.role == "assistant"]
        if not t.reply:
            replies.append(Message.assistant("Je reprends le test en échec."))
    model = ScriptedModel(replies, name="scripted-agent")
    summ = summarizer() if with_model else None
    events: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    session = Session.in_memory()
    with tempfile.TemporaryDirectory() as spill:
        agent = (ct.agent()
                 .use(ct.runtime.SessionTree, session=session)
                 .use(ct.runtime.SystemPrompt, text=plan.system)
                 .use(ct.runtime.ToolResultLoop)
                 .use(ct.runtime.MaxIterations, limit=10_000)
                 .use(ct.runtime.DefaultCompactionPipeline, window=window,
                      summarizer=summ,
                      compact_at=0.7, compact_to=0.4)
                 .use(ct.runtime.DefaultToolPipeline, tools=replay_tools(plan), concurrency=1,
                      store=ct.OverflowStore(spill))
                 .run(model))
        agent.on("compacted", lambda env, p: events.append(p))
        agent.on("compaction_failed", lambda env, p: failed.append(p))
        t0 = time.perf_counter()
        for t in plan.turns:
            agent.start(t.user)
        dt = time.perf_counter() - t0
    ratios = [p["tokens_after"] / p["target"] for p in events if p.get("target")]
    reports = [x if isinstance(x, dict) else vars(x) for p in events
               for x in p.get("stages", ())]  # StageReport objects, or their dicts
    used = Counter(STAGE_ABBR.get(x["name"], x["name"]) for x in reports if x.get("applied"))
    bad = sum(not pairing_ok(c)[0] for c in model.calls)
    last = model.calls[-1]
    return LoopRun("with scripted summarizer" if with_model else "no model",
                   score(last, plan.scored), len(events), len(failed), ratios,
                   len(model.calls), bad, COUNTER.count_messages(last), dt,
                   " ".join(f"{k}x{v}" for k, v in used.items()) or "-",
                   len(summ.calls) if summ else 0)


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def pct(k: int, n: int) -> str:
    return f"{k}/{n} = {100 * k / n:.1f}%" if n else "n/a"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one 50k session, a short loop")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    sizes = [("50k", 50_000)] if args.quick else [("50k", 50_000), ("200k", 200_000),
                                                  ("1M", 1_000_000)]
    variant_budget = 50_000 if args.quick else 200_000
    loop_budget, loop_window = (60_000, 24_000) if args.quick else (150_000, 40_000)

    print(f"contextree {ct.__version__} - compaction fidelity bench (seed {args.seed}"
          f"{', quick' if args.quick else ''})")
    print("A fact is kept when its key string is anywhere in the compacted context; 22 "
          "facts per session.")
    print("stages applied: TR ToolResults, SW SlidingWindow, SU Summarize, DG Digest; tokens "
          "after / target: EstimateCounter on the built context.")
    all_runs: list[tuple[str, Run]] = []  # (scenario, run)
    plans: dict[str, Plan] = {}
    timing_1m: float | None = None

    # (a)+(b) one-shot, each stage alone and the default ladder, per size and ratio
    for i, (name, budget) in enumerate(sizes):
        t0 = time.perf_counter()
        plan = make_plan(args.seed + i, budget)
        plans[name] = plan
        msgs = render(plan)
        tokens = COUNTER.count_messages(msgs)
        gen_s = time.perf_counter() - t0
        print(f"\n=== (a)(b) {name} session: {tokens:,} estimated tokens, {len(msgs):,} "
              f"messages, {len(plan.turns)} user turns (generated in {gen_s:.1f} s)")
        base = score(msgs, plan.scored)
        print(f"uncompacted: {pct(*base.total)} facts present, stale shown: {base.stale}, "
              f"pairing {'ok' if pairing_ok(msgs)[0] else 'BROKEN'}")
        for ratio in RATIOS:
            runs = [one_shot(msgs, plan.scored, label, make(), ratio) for label, make in CONFIGS]
            all_runs += [(f"ab:{name}", r) for r in runs]
            if name == "1M" and ratio == 0.2:  # the median of 3 runs, each on a fresh session
                times = [next(r.seconds for r in runs if r.label == "default")]
                times += [one_shot(msgs, plan.scored, "default", default_ladder(), 0.2).seconds
                          for _ in range(2)]
                timing_1m = sorted(times)[1]
            print_table(f"-- {name}, target {int(ratio * 100)}% of {tokens:,} tokens",
                        runs, plan.facts, [label for label, _ in CONFIGS])

    # (d) usage, (e) reused ids, (f) vocabularies, on one session
    vname = "50k" if args.quick else "200k"
    vplan = plans.get(vname) or make_plan(args.seed + 1, variant_budget)
    variants: list[tuple[str, str, list[Message], float]] = [
        ("d", "usage x0.8", render(vplan, usage=0.8), 0.8),
        ("d", "usage x1.0", render(vplan, usage=1.0), 1.0),
        ("d", "usage x1.25", render(vplan, usage=1.25), 1.25),
        ("e", "reused ids", render(vplan, id_style="reused"), 1.0),
        *[("f", v, render(vplan, v), 1.0) for v in VOCABS if v != "native"],
    ]
    for cfg_label, make in [("default", lambda: default_ladder()),
                            ("default+LLM", lambda: default_ladder(model=summarizer()))]:
        for ratio in RATIOS:
            runs = []
            for scen, label, msgs, scale in variants:
                r = one_shot(msgs, vplan.scored, label, make(), ratio, scale)
                runs.append(r)
                all_runs.append((f"{scen}:{cfg_label}", r))
            print_table(f"-- (d)(e)(f) {vname} session, {cfg_label}, target {int(ratio * 100)}%"
                        " (usage: window and target scaled like the provider's count)",
                        runs, vplan.facts, [label for _, label, _, _ in variants], scaled=True)

    # (c) the agent loop
    print(f"\n=== (c) agent loop: a {loop_budget // 1000}k-token plan replayed through "
          f"the runtime, window {loop_window:,} (compact at 0.7, to 0.4)")
    lplan = make_plan(args.seed + 100, loop_budget)
    loops = [agent_loop(lplan, loop_window, with_model=False),
             agent_loop(lplan, loop_window, with_model=True)]
    counts = Counter(f.kind for f in lplan.facts)
    print(f"{'':24}" + "".join(f"{lr.label:>28}" for lr in loops))
    for kind, label in KINDS:
        print(f"{label + f' ({counts[kind]})':24}" + "".join(
            f"{fmt_kept(lr.score.kept.get(kind, [])):>28}" for lr in loops))
    for kind, label in PROBE_KINDS:
        print(f"{'probe: ' + label:24}" + "".join(
            f"{fmt_kept(lr.score.probes.get(kind, [])):>28}" for lr in loops))
    rows = [
        ("facts in the final call", [pct(*lr.score.total) for lr in loops]),
        ("stale shown as current", [str(lr.score.stale) for lr in loops]),
        ("compactions (failed)", [f"{lr.compactions} ({lr.failed})" for lr in loops]),
        ("after/target min-max", [f"{min(lr.after_ratios):.2f}-{max(lr.after_ratios):.2f}"
                                  if lr.after_ratios else "n/a" for lr in loops]),
        ("stages applied", [lr.stages for lr in loops]),
        ("summarizer calls", [str(lr.summarizer_calls) for lr in loops]),
        ("model calls", [str(lr.calls) for lr in loops]),
        ("calls with bad pairing", [str(lr.pairing_bad) for lr in loops]),
        ("final call tokens", [f"{lr.tokens_final:,}" for lr in loops]),
        ("seconds", [f"{lr.seconds:.2f}" for lr in loops]),
    ]
    for label, row in rows:
        print(f"{label:24}" + "".join(f"{c:>28}" for c in row))
    for lr in loops:
        if lr.score.missing:
            print(f"  missing ({lr.label}): {', '.join(lr.score.missing)}")

    # summary against the targets
    print("\n=== summary against the targets")

    def agg(pred: Callable[[str, Run], bool]) -> tuple[int, int]:
        k = n = 0
        for scen, r in all_runs:
            if pred(scen, r):
                a, b = r.score.total
                k, n = k + a, n + b
        return k, n

    def default_at(name: str, ratio: float) -> tuple[int, int]:
        return agg(lambda s, r: s == f"ab:{name}" and r.label == "default" and r.ratio == ratio)

    def line(ok: bool | None, text: str) -> None:
        print(f"{'n/a ' if ok is None else 'PASS' if ok else 'MISS'}  {text}")

    for ratio, want in ((0.2, 0.95), (0.1, 0.80)):
        k, n = agg(lambda s, r, ratio=ratio: s.startswith("ab:") and r.label == "default"
                   and r.ratio == ratio)
        per = ", ".join(f"{name} {pct(*default_at(name, ratio))}" for name, _ in sizes)
        line(n > 0 and k / n >= want, f"default ladder, no model, {int(ratio * 100)}%: facts "
             f"kept {pct(k, n)} (target >= {int(want * 100)}%) [{per}]")
    for lr in loops:
        k, n = lr.score.total
        line(k >= 21, f"agent loop ({lr.label}): {k}/{n} facts in the final call after "
             f"{lr.compactions} compactions (target >= 21/22)")
    # per probe category, default ladder without a model: every one-shot run (all sizes,
    # ratios, usage scales, id styles and vocabularies) and the loop's final call
    for cat, kinds in CATEGORIES:
        k = n = 0
        for scen, r in all_runs:
            if r.label == "default" or scen.endswith(":default"):
                flags = r.score.category(kinds)
                k, n = k + sum(flags), n + len(flags)
        flags = loops[0].score.category(kinds)
        lk, ln = sum(flags), len(flags)
        new = [f for scen, r in all_runs if r.label == "default" or scen.endswith(":default")
               for kind in kinds for f in r.score.probes.get(kind, [])]
        goal = cat in ("recall", "artifact trail")
        line((n > 0 and k / n >= 0.95) if goal else None,
             f"probes, {cat} (no model): {pct(k, n)} of one-shot runs, {lk}/{ln} in the "
             f"loop{' (target >= 95%)' if goal else ''}; the new probes alone "
             f"{pct(sum(new), len(new))}")
    for cfg in ("default", "default+LLM"):
        rt_k = rt_n = 0
        worst = []
        for scen, r in all_runs:
            if r.label == cfg or (scen.endswith(f":{cfg}") and not scen.startswith("ab:")):
                for kind in ("rule", "task"):
                    flags = r.score.kept.get(kind, [])
                    rt_k, rt_n = rt_k + sum(flags), rt_n + len(flags)
                    where = f"{scen}/{r.label}@{int(r.ratio * 100)}%"
                    if not all(flags) and where not in worst:
                        worst.append(where)
        line(rt_k == rt_n, f"{cfg}: rules and task kept at every ratio: {pct(rt_k, rt_n)}"
             + (f" (missed in {', '.join(worst[:6])}{' ...' if len(worst) > 6 else ''})"
                if worst else ""))
    for cfg in ("default", "default+LLM"):
        rs = [r.est_ratio for s, r in all_runs if s.startswith("ab:") and r.label == cfg]
        inside = sum(0.85 <= x <= 1.0 for x in rs)
        line(inside == len(rs), f"{cfg}: tokens after / target within 0.85-1.0: {inside}/"
             f"{len(rs)} runs (min {min(rs):.2f}, max {max(rs):.2f})")
    rs = [r.after_ratio for s, r in all_runs if s.startswith("d:")]
    inside = sum(0.85 <= x <= 1.0 for x in rs)
    line(inside == len(rs), f"usage x0.8/x1.0/x1.25: provider-scaled tokens after / target "
         f"within 0.85-1.0: {inside}/{len(rs)} runs (min {min(rs):.2f}, max {max(rs):.2f})")
    if timing_1m is None:
        line(None, "1M-token compaction time: not measured (--quick)")
    else:
        line(timing_1m < 0.5, f"1M-token session, default ladder to 20%: {timing_1m:.3f} s, "
             "median of 3 (target < 0.5 s)")
    n_ctx = len(all_runs) + sum(lr.calls for lr in loops)
    bad = sum(not r.pairing for _, r in all_runs) + sum(lr.pairing_bad for lr in loops)
    line(bad == 0, f"pairing invariant: {n_ctx - bad}/{n_ctx} contexts valid (target 100%)")
    stale = sum(r.score.stale for s, r in all_runs if r.label in ("default", "default+LLM")
                or not s.startswith("ab:"))
    print(f"info  stale corrected values shown as current (default ladders, all runs): {stale}")
    print(f"\ntotal time {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
