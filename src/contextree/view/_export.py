"""Readable exports for pasting into an issue or a pull request: Markdown, and a static HTML
page (no script). Both take one branch or the whole tree, from a ``SessionView`` (so they are
redacted like the viewer).

Markdown keeps what the messages say as it is and puts everything else (tool arguments and
results) in fenced blocks whose fence is longer than any run of backticks inside, and folds
long results and thinking in ``<details>``. The HTML is rendered with markdown-it-py (raw
HTML off, so text from the session is escaped) and Pygments, and carries a policy that
allows no script at all.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from .._text import controls_visible, first_line
from ._model import SessionView, text_of
from ._page import _hash

__all__ = ["html_export", "markdown_export", "outline"]

_LONG_LINES = 30
_BACKTICKS = re.compile(r"`+")


def outline(view: SessionView, at: int | None, whole: bool) -> Iterator[tuple[int, int, str]]:
    """The entries an export shows, in order, as ``(entry number, depth, heading)``: the
    branch ending at ``at`` (default: the current leaf), or with ``whole`` every entry of the
    tree, depth first, a heading before each branch that leaves a branch point."""
    parents = view.data["parents"]
    types = [r["t"] for r in view.data["entries"]]
    if not whole:
        leaf = at if at is not None else view.data["leaf"]
        if leaf is None or leaf < 0:
            leaves = view.leaves()
            leaf = leaves[-1] if leaves else -1
        for k in view.path(leaf) if leaf >= 0 else ():
            yield k, 0, ""
        return
    kids: dict[int, list[int]] = {}
    for k, p in enumerate(parents):
        if types[k] != "leaf":
            kids.setdefault(p, []).append(k)
    stack: list[tuple[int, int, str]] = [(k, 0, "") for k in reversed(kids.get(-1, []))]
    while stack:
        k, depth, heading = stack.pop()
        yield k, depth, heading
        cs = kids.get(k, [])
        if len(cs) == 1:
            stack.append((cs[0], depth, ""))
        else:
            for i in range(len(cs) - 1, -1, -1):
                stack.append((cs[i], depth + 1,
                              f"branch {i + 1} of {len(cs)} from {view.entries[k].id[:8]}"))


def _fence(text: str, lang: str = "") -> str:
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _folded_md(summary: str, body: str, fold: bool) -> str:
    if not fold:
        return body
    return f"<details><summary>{html.escape(summary)}</summary>\n\n{body}\n\n</details>"


def _is_long(text: str) -> bool:
    return text.count("\n") >= _LONG_LINES or len(text) > 4000


def _who(rec: dict[str, Any]) -> str:
    if rec["t"] == "message":
        who = str(rec["r"])
        if rec.get("r") == "tool":
            who = f"tool result ({rec.get('n') or 'tool'})"
        return who + (f" · {rec['m']}" if rec.get("m") else "")
    return str(rec["t"]).replace("_", " ")


def markdown_export(view: SessionView, *, at: int | None = None, whole: bool = False,
                    notice: bool = True) -> str:
    """The branch ending at ``at`` (or the whole tree) as Markdown; ``notice``: with the line
    that says how it was redacted."""
    d = view.data
    s = d["session"]
    out = [f"# {s['name'] or 'Session ' + s['id']}", "",
           f"Session `{s['id']}`, {'the whole tree' if whole else 'one branch'}, "
           f"exported by contextree.{' ' + _notice(d) if notice else ''}", ""]
    labels = d["labels"]
    for k, depth, heading in outline(view, at, whole):
        rec = d["entries"][k]
        if rec["t"] in ("leaf", "label"):
            continue
        if heading:
            out += [f"{'#' * min(6, 2 + depth)} ↳ {heading}", ""]
        label = f" · label `{labels[str(k)]}`" if str(k) in labels else ""
        if rec["t"] in ("model_change", "thinking_level_change", "active_tools_change",
                        "session_info", "custom"):
            out += [f"*{_who(rec)}: {rec.get('s', '')}*{label}", ""]
            continue
        out += [f"**{_who(rec)}**{label} · `{rec['id'][:8]}`", ""]
        if rec["t"] == "compaction":
            out += [f"> compacted {rec['tb']} tokens; the model sees this summary instead:", "",
                    str(rec["s"]), ""]
            continue
        if rec["t"] == "branch_summary":
            out += ["> returned from another branch; its summary:", "", str(rec["s"]), ""]
            continue
        for part in rec.get("c", ()):
            if part["k"] == "text":
                if rec.get("r") == "tool":
                    body = _fence(part["s"])
                    out += [_folded_md(first_line(part["s"], 80), body, _is_long(part["s"])), ""]
                else:
                    out += [part["s"], ""]
            elif part["k"] == "think":
                out += [_folded_md("thinking", part["s"], True), ""]
            elif part["k"] == "img":
                out += ["*[an image]*", ""]
            else:
                out += [f"*{part['s']}*", ""]
        for call in rec.get("tc", ()):
            out += [f"→ calls `{call['name']}`", "",
                    _folded_md("arguments", _fence(call["args"], "json"), _is_long(call["args"])),
                    ""]
    # a person may cat the file: an escape sequence from a tool output shows as text
    return controls_visible("\n".join(out).rstrip()) + "\n"


def _notice(d: dict[str, Any]) -> str:
    red = d["redaction"]
    if not red["enabled"]:
        return "NOT REDACTED (--no-redact): it may contain secrets."
    found = red["found"]
    if not found:
        return "Redacted: no secret was found."
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(found.items()))
    n = sum(found.values())
    return f"Redacted: {n} secret{'' if n == 1 else 's'} replaced ({kinds})."


@cache
def _renderer() -> Any:
    from markdown_it import MarkdownIt

    md: Any = MarkdownIt("commonmark", {"html": False, "highlight": _highlight})
    default = md.renderer.rules.get("link_open")

    def link_open(tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        if default is not None:
            return str(default(tokens, idx, options, env))
        return str(md.renderer.renderToken(tokens, idx, options, env))

    md.renderer.rules["link_open"] = link_open
    md.renderer.rules["image"] = lambda tokens, idx, options, env: html.escape(
        f"[image: {tokens[idx].content or tokens[idx].attrGet('src')}]")
    return md


def _highlight(code: str, lang: str, _attrs: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(lang) if lang else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""  # markdown-it escapes it as plain code
    return str(highlight(code, lexer, HtmlFormatter(nowrap=True, cssclass="hl")))


@cache
def _style() -> str:
    from pygments.formatters import HtmlFormatter

    pyg = str(HtmlFormatter(cssclass="hl").get_style_defs(".hl"))
    return ("body{font:15px/1.5 system-ui,sans-serif;max-width:900px;margin:2em auto;padding:0 1em;"
            "color:#1d1f21}.e{border:1px solid #ddd;border-radius:8px;margin:12px 0;padding:4px 14px}"
            ".user{background:#eef4ff}.system,.compaction{background:#fff8e6}.tool{background:#f6f6f3}"
            ".h{font-size:12px;color:#666}pre{background:#f4f4f1;padding:8px;overflow:auto}"
            "img{max-width:100%}.note{font-size:13px;color:#555}.off{color:#b3261e;font-weight:600}"
            ".branch{border-left:3px solid #2a62c9;padding-left:8px;font-weight:600}" + pyg)


def html_export(view: SessionView, *, at: int | None = None, whole: bool = False,
                notice: bool = True) -> str:
    """The branch ending at ``at`` (or the whole tree) as a static page: no script, every
    text escaped, a policy that allows only its own style and ``data:`` images (``notice``
    as for ``markdown_export``)."""
    md = _renderer()
    esc = html.escape
    d = view.data
    s = d["session"]
    style = _style()
    csp = f"default-src 'none'; style-src {_hash(style)}; img-src data:; base-uri 'none'; form-action 'none'"
    title = s["name"] or f"Session {s['id']}"
    said = _notice(d) if notice else ""
    out = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<meta http-equiv=\"Content-Security-Policy\" content=\"{esc(csp)}\">",
           "<meta name=\"referrer\" content=\"no-referrer\">",
           f"<title>{esc(title)}</title><style>{style}</style></head><body>",
           f"<h1>{esc(title)}</h1>",
           f"<p class=\"note{'' if d['redaction']['enabled'] else ' off'}\">session "
           f"<code>{esc(s['id'])}</code>, {'the whole tree' if whole else 'one branch'}. "
           f"{esc(said)}</p>"]
    labels = d["labels"]
    for k, depth, heading in outline(view, at, whole):
        rec = d["entries"][k]
        if rec["t"] in ("leaf", "label"):
            continue
        if heading:
            out.append(f"<p class=\"branch\">{'↳ ' * depth}{esc(heading)}</p>")
        label = f" · label <code>{esc(labels[str(k)])}</code>" if str(k) in labels else ""
        cls = rec.get("r", rec["t"])
        out.append(f"<div class=\"e {esc(str(cls))}\"><p class=\"h\"><b>{esc(_who(rec))}</b>"
                   f"{label} · <code>{esc(rec['id'][:8])}</code></p>")
        if rec["t"] in ("compaction", "branch_summary"):
            out.append(f"<p class=\"h\">{'compacted ' + str(rec['tb']) + ' tokens; the summary' if rec['t'] == 'compaction' else 'summary of another branch'}:</p>")
            out.append(md.render(str(rec["s"])))
        elif "c" not in rec:
            out.append(f"<p>{esc(text_of(rec))}</p>")
        for part in rec.get("c", ()):
            if part["k"] == "text":
                if rec.get("r") == "tool":
                    body = f"<pre>{esc(part['s'])}</pre>"
                    out.append(f"<details><summary>{esc(first_line(part['s'], 80))}</summary>{body}</details>"
                               if _is_long(part["s"]) else body)
                else:
                    out.append(md.render(part["s"]))
            elif part["k"] == "think":
                out.append(f"<details><summary>thinking</summary>{md.render(part['s'])}</details>")
            elif part["k"] == "img":
                out.append(f"<img alt=\"image from the session\" src=\"{esc(part['src'])}\">")
            else:
                out.append(f"<p class=\"h\">{esc(part['s'])}</p>")
        for call in rec.get("tc", ()):
            out.append(f"<p class=\"h\">calls <code>{esc(call['name'])}</code></p>"
                       f"<pre>{esc(call['args'])}</pre>")
        out.append("</div>")
    out.append("</body></html>\n")
    return "\n".join(out)
