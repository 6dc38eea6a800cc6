"""The viewer's HTML page: one self-contained file (the script, the styles and the session's
data inline; no CDN, no remote font), safe for any session.

Safety, in one place: the session goes in only as JSON inside a ``<script
type="application/json">`` block, with ``<``, ``>``, ``&`` and U+2028/9 escaped so that no
text can close the block; the page's script builds every node with ``textContent``; and a
Content-Security-Policy allows no script but the page's own (by its hash), no style but its
own, images only from ``data:`` URLs and no connection at all.
"""

from __future__ import annotations

import base64
import hashlib
import html
from functools import cache
from importlib.resources import files
from typing import Any

import orjson

__all__ = ["content_security_policy", "page_html", "script_json"]

_ESCAPES = ((b"&", b"\\u0026"), (b"<", b"\\u003c"), (b">", b"\\u003e"),
            ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def script_json(data: Any) -> str:
    """``data`` as JSON that can sit inside a ``<script>`` block: no character in it can end
    the block or start a comment there (``<``, ``>`` and ``&`` are written as ``\\u`` escapes,
    which JSON reads back as the same characters)."""
    raw = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    for char, escape in _ESCAPES:
        raw = raw.replace(char, escape)
    return raw.decode()


@cache
def _asset(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def content_security_policy(script: str, style: str) -> str:
    """The page's policy: only this script and this style, images from ``data:`` only,
    nothing fetched, no form sent, no frame, no base URL."""
    return (f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def page_html(data: dict[str, Any], *, title: str, notice: str, redacted: bool) -> str:
    """The whole page for one session view's ``data``; ``notice`` is the line under the
    header that says whether the page is redacted."""
    script, style = _asset("page.js"), _asset("page.css")
    esc = html.escape
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{esc(content_security_policy(script, style))}\">\n"
        "<meta name=\"referrer\" content=\"no-referrer\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{esc(title)}</title>\n<style>{style}</style></head>\n<body>\n"
        f"<header><h1>{esc(title)}</h1><span class=\"meta\">{esc(_meta(data))}</span>"
        "<input id=\"q\" type=\"search\" placeholder=\"search this session (Enter)\" "
        "aria-label=\"search this session\"></header>\n"
        f"<div class=\"banner{'' if redacted else ' off'}\" id=\"redaction\">{esc(notice)}</div>\n"
        "<main><nav id=\"tree\" aria-label=\"session tree\"></nav>"
        "<section id=\"msgs\" aria-label=\"messages\"></section></main>\n"
        "<aside id=\"side\" aria-live=\"polite\"></aside>\n"
        f"<script type=\"application/json\" id=\"ct-data\">{script_json(data)}</script>\n"
        f"<script>{script}</script>\n</body></html>\n"
    )


def _meta(data: dict[str, Any]) -> str:
    s = data["session"]
    bits = [f"session {s['id']}", f"{len(data['entries'])} entries"]
    if s.get("created_at"):
        bits.append(f"created {str(s['created_at'])[:19].replace('T', ' ')}")
    return " · ".join(bits)
