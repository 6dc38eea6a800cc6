"""Debian's chromium, headless, driven by Playwright: the one way the viewer's tests, its
screenshot script and its bench open a page. Every request but the page itself is aborted and
recorded, and every dialog is recorded (and dismissed), so a test can assert that nothing ran
and nothing left the page."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def why_no_browser() -> str | None:
    """Why the browser tests cannot run here, or ``None`` when they can."""
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        return ("Debian's chromium is not installed (apt-get install -y chromium; .ci/run "
                "installs it): the viewer's browser tests need it")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing (pip install -e '.[dev]')"
    return None


@dataclass
class Watch:
    """What a page did that it must not: requests (aborted), dialogs, console errors."""

    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@contextmanager
def browser() -> Iterator[Any]:
    """A headless chromium (Playwright ``Browser``), closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists()
                              else shutil.which("chromium"), args=ARGS)
        try:
            yield b
        finally:
            b.close()


@contextmanager
def open_page(b: Any, page_file: Path | str, *, width: int = 1280, height: int = 860,
              allow: str | None = None,
              ready: str | None = "body[data-ready='1']") -> Iterator[tuple[Any, Watch]]:
    """``page_file`` (a file, or an http:// URL of ``view --serve``) open in a new page of
    ``b``, ready (its script ran, when ``ready`` names the element that says so), and what
    it did. Requests go through only to the page itself, or to URLs under ``allow`` (the
    server's token: the index's links)."""
    watch = Watch()
    ctx = b.new_context(viewport={"width": width, "height": height},
                        java_script_enabled=True)
    url = page_file if isinstance(page_file, str) else page_file.resolve().as_uri()

    def allowed(u: str) -> bool:
        return u == url or (allow is not None and u.startswith(allow))

    def route(r: Any) -> None:
        if allowed(r.request.url):
            r.continue_()
        else:
            watch.requests.append(r.request.url)
            r.abort()

    ctx.route("**/*", route)
    page = ctx.new_page()
    page.on("request", lambda req: not allowed(req.url) and not req.url.startswith("data:")
            and watch.requests.append(req.url))
    page.on("dialog", lambda d: (watch.dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: m.type == "error" and watch.errors.append(m.text))
    page.on("pageerror", lambda e: watch.errors.append(str(e)))
    page.goto(url)
    if ready is not None:
        page.wait_for_selector(ready, timeout=20_000)
    try:
        yield page, watch
    finally:
        ctx.close()
