"""The screenshot in docs/viewer.md, taken of the sample session in headless chromium:

    PYTHONPATH=src python tests/view/viewer_screenshot.py docs/viewer.png

The tree with its branch point of retries unfolded, the messages of the selected branch,
and "what the model saw" at the last entry. ``test_view_browser.py`` takes the same one
into its tmp directory on every run."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from viewer_browser import browser, open_page
from viewer_sample import sample_session

from contextree import Session
from contextree.view import write_view


def take(out: Path) -> Path:
    """Write the screenshot of the sample session's viewer to ``out``."""
    with tempfile.TemporaryDirectory(prefix="viewer-shot-") as tmp:
        path = Path(tmp) / "calc.jsonl"
        ids = sample_session(path)
        with Session.open(path) as s:
            page_file = write_view(s, Path(tmp) / "calc.html")
        with browser() as b, open_page(b, page_file, width=1400, height=900) as (page, _):
            page.locator(".others-toggle").click()
            page.locator(f"#msgs .msg:has(.mh span:text-is('{ids['tip'][:8]}')) .saw").click()
            page.screenshot(path=str(out))
    return out


if __name__ == "__main__":
    print(take(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/viewer.png")))
