"""The viewer in a real browser (Debian's chromium, headless, through Playwright): tree
navigation at a branch point of 40 retries, "what the model saw" against the library's own
``build_context``, a compaction receipt, search, redaction, and hostile sessions that must run
nothing and fetch nothing. Screenshots of the main views go to the test's tmp directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from viewer_browser import browser, open_page, why_no_browser
from viewer_sample import HOSTILE, RETRIES, SECRET, hostile_session, sample_session

from contextree import Session
from contextree.view import write_view

pytestmark = pytest.mark.skipif(why_no_browser() is not None, reason=why_no_browser() or "")


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go, for a person to look at."""
    return tmp_path_factory.mktemp("viewer-screenshots")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path, Path]:
    """The sample session, its page (redacted) and its page with --no-redact."""
    d = tmp_path_factory.mktemp("viewer")
    path = d / "calc.jsonl"
    ids = sample_session(path)
    with Session.open(path) as s:
        red = write_view(s, d / "calc.html")
        raw = write_view(s, d / "raw.html", redact=False)
    return path, ids, red, raw


def _clean(watch: Any) -> None:
    assert watch.dialogs == [] and watch.requests == [], (watch.dialogs, watch.requests)
    assert watch.errors == [], watch.errors


def test_the_tree_folds_a_branch_point_of_retries(chromium: Any, sample: Any,
                                                  shots: Path) -> None:
    _, _, page_file, _ = sample
    with open_page(chromium, page_file) as (page, watch):
        page.screenshot(path=str(shots / "main.png"))
        toggle = page.locator(".others-toggle")
        assert toggle.count() == 1 and toggle.inner_text() == f"{RETRIES - 1} other branches"
        assert page.locator(".others .node").count() == 0  # folded: not a wall of 40 lines
        assert page.locator("#msgs").get_by_text(f"Attempt {RETRIES - 1}:").count() == 1
        toggle.click()
        rows = page.locator(".others .node")
        assert rows.count() == RETRIES - 1
        page.screenshot(path=str(shots / "branch-point-open.png"))
        rows.filter(has_text="Attempt 5:").click()
        msgs = page.locator("#msgs")
        assert msgs.get_by_text("Attempt 5:").count() == 1
        assert msgs.get_by_text(f"Attempt {RETRIES - 1}:").count() == 0
        assert msgs.get_by_text("Done: ").count() == 0  # the leaf's branch is not shown
        page.select_option("#branch-pick", label=page.locator("#branch-pick option").filter(
            has_text="Done").inner_text())
        assert msgs.get_by_text("Done: ").count() == 1
        labels = page.locator("#tree .chip").all_inner_texts()
        assert {"diagnosis", "model", "compaction", "name"} <= set(labels)
        _clean(watch)


def test_what_the_model_saw_is_build_context(chromium: Any, sample: Any, shots: Path) -> None:
    path, ids, _, raw_file = sample
    with Session.open(path) as s, open_page(chromium, raw_file) as (page, watch):
        checked = 0
        for key in ("tip", "compaction", "chosen", "diagnosis", "result", "read", "task"):
            entry = page.locator(f"#msgs .msg:has(.mh span:text-is('{ids[key][:8]}'))")
            if entry.count() == 0:  # on another branch, or a result paired with its call
                continue
            entry.locator(".saw").click()
            items = page.locator("#context .ctx")
            seen = [(items.nth(i).get_attribute("data-role"),
                     items.nth(i).get_attribute("data-entry") or None)
                    for i in range(items.count())]
            ctx = s.build_context(ids[key])
            assert seen == list(zip([m.role for m in ctx.messages], ctx.entry_ids,
                                    strict=True)), key
            if key == "tip":
                text = page.locator("#context").inner_text()
                assert "Earlier parts of this conversation were compacted" in text
                assert "[env output cleared]" in text and "VAR_0" not in text
                page.screenshot(path=str(shots / "what-the-model-saw.png"))
            page.locator("#side .close").click()
            checked += 1
        assert checked == 6  # every one but the result, which shows inside its call
        _clean(watch)


def test_a_compaction_receipt(chromium: Any, sample: Any, shots: Path) -> None:
    path, ids, page_file, _ = sample
    with open_page(chromium, page_file) as (page, watch):
        page.locator("#msgs .msg.compaction .receipt").click()
        receipt = page.locator("#receipt")
        text = receipt.inner_text()
        assert "5400 before → 900 after" in text
        assert "tool_results, digest" in text
        with Session.open(path) as s:
            branch = [e for e in s.branch(ids["compaction"])][:-1]
        start = [e.id for e in branch].index(ids["env"])
        messages = [e.id for e in branch if e.type == "message"]
        kept = [e for e in messages[messages.index(ids["env"]):] if e != ids["env_result"]]
        assert f"{len(kept)} entries (from {ids['env'][:8]}" in text
        assert "1 tool results replaced by a placeholder" in text
        assert f"folded into the summary\t\n{start} entries" in text
        assert "still in this session" in text
        receipt.locator("summary").nth(1).click()  # list what was folded
        receipt.get_by_text("The **tests fail**", exact=False).first.wait_for(timeout=5000)
        page.screenshot(path=str(shots / "compaction-receipt.png"))
        _clean(watch)


def test_search_finds_an_entry_on_another_branch(chromium: Any, sample: Any,
                                                 shots: Path) -> None:
    _, _, page_file, _ = sample
    with open_page(chromium, page_file) as (page, watch):
        page.fill("#q", "attempt 7:")
        page.press("#q", "Enter")
        results = page.locator("#results .sr")
        assert results.count() == 1
        page.screenshot(path=str(shots / "search.png"))
        results.first.click()
        hit = page.locator("#msgs .hit")
        assert "Attempt 7:" in hit.inner_text()
        page.fill("#q", "REDACTED:aws-key")
        page.press("#q", "Enter")
        assert page.locator("#results .sr").count() == 1
        page.fill("#q", SECRET.lower())
        page.press("#q", "Enter")
        assert page.locator("#results .sr").count() == 0
        _clean(watch)


def test_redaction_on_by_default_and_off_says_so(chromium: Any, sample: Any) -> None:
    _, _, page_file, raw_file = sample
    with open_page(chromium, page_file) as (page, watch):
        for d in page.locator("#msgs details").all():
            d.evaluate("d => d.open = true")
        page.wait_for_timeout(300)  # the toggle events fill the folded parts
        body = page.locator("body").inner_text()
        assert SECRET not in body and "[REDACTED:aws-key:1]" in body
        assert page.locator("#redaction").inner_text().startswith("Redacted: 1 secret")
        _clean(watch)
    with open_page(chromium, raw_file) as (page, watch):
        assert "NOT REDACTED" in page.locator("#redaction").inner_text()
        _clean(watch)


def test_a_hostile_session_runs_nothing_and_fetches_nothing(chromium: Any, tmp_path: Path,
                                                            shots: Path) -> None:
    path = tmp_path / "hostile.jsonl"
    hostile_session(path)
    with Session.open(path) as s:
        page_file = write_view(s, tmp_path / "hostile.html")
    with open_page(chromium, page_file) as (page, watch):
        for d in page.locator("details").all():  # unfold everything: results, arguments
            d.evaluate("d => d.open = true")
        page.wait_for_timeout(300)
        for b in page.locator("#msgs .saw").all():
            b.click()
            page.locator("#side .close").click()
        page.fill("#q", "alert")
        page.press("#q", "Enter")
        page.locator("#results .sr").first.click()
        page.wait_for_timeout(300)
        page.screenshot(path=str(shots / "hostile.png"))
        assert page.locator("script").count() == 2
        assert page.locator("img[onerror], svg[onload], [onload], [onerror]").count() == 0
        hrefs = page.eval_on_selector_all("a", "as => as.map(a => a.getAttribute('href'))")
        assert all(h.startswith(("https:", "http:", "mailto:")) for h in hrefs), hrefs
        assert page.locator("a[rel='noopener noreferrer nofollow']").count() == len(hrefs)
        assert page.locator("#msgs").get_by_text(HOSTILE[0], exact=False).count() >= 1
        assert page.evaluate("getComputedStyle(document.body).display") != "none"
        _clean(watch)


def test_fold_and_unfold_keep_only_the_branch_in_the_document(chromium: Any, sample: Any) -> None:
    _, _, page_file, _ = sample
    with open_page(chromium, page_file) as (page, watch):
        toggle = page.locator(".others-toggle")
        for _ in range(3):
            toggle.click()
            assert page.locator(".others .node").count() == RETRIES - 1
            toggle.click()
            assert page.locator(".others .node").count() == 0
        assert page.locator("#msgs .msg.assistant").count() <= 6  # one retry, not forty
        _clean(watch)


def test_a_served_catalog_index_leads_to_each_session(chromium: Any, tmp_path: Path,
                                                       shots: Path) -> None:
    # view --serve DIR: the index in the browser, its names redacted, a click on a row opens
    # that session's viewer under the same token; nothing is fetched from elsewhere
    from test_view_catalog import GITHUB, catalog_dir

    from contextree.storage import open_catalog
    from contextree.view import ViewServer, view_html

    catalog_dir(tmp_path)

    def render(target: str) -> str:
        with Session.open(target, readonly=True) as s:
            return view_html(s)

    server = ViewServer(open_catalog(tmp_path), render).start()
    try:
        with open_page(chromium, server.url, allow=server.url, ready="table") as (page, watch):
            rows = page.locator("table tr").all_inner_texts()
            assert len(rows) == 4 and any("deploy [REDACTED:aws-key:1]" in r for r in rows)
            assert SECRET not in page.content()
            page.screenshot(path=str(shots / "catalog-index.png"))
            page.click("text=deploy [REDACTED:aws-key:1]")
            page.wait_for_selector("body[data-ready='1']", timeout=20_000)
            assert page.url.startswith(server.url + "s/")
            text = page.inner_text("#msgs")
            assert "deploy with [REDACTED:github-token:1]" in text and GITHUB not in text
            page.go_back()
            page.click("text=calc fix")
            page.wait_for_selector("body[data-ready='1']", timeout=20_000)
            assert "Attempt 7:" in page.content()
            _clean(watch)
    finally:
        server.close()
