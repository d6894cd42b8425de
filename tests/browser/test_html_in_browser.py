"""The gate's HTML report and ``show --html`` opened in a real headless Chromium.

Run by ``nox -s html_check``, which installs Chromium from the OS packages where it is missing
and Playwright from the ``browser`` dependency group; Playwright drives that executable
(``DSH_CHROMIUM``, else ``chromium`` on PATH) and never a browser build of its own. Elsewhere
these tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "playwright.sync_api", reason="Playwright is installed only by nox -s html_check"
)

# Imported after the skip above, so that a run without Playwright skips instead of erroring.
from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "snapshots" / "sdk"
SCRIPT = str(Path(sys.executable).parent / "dsh-snapshot")
# Where the session keeps the screenshot (nox -s html_check sets it under build/).
SCREENSHOT = os.environ.get("DSH_HTML_SCREENSHOT")


def _chromium() -> str:
    path = os.environ.get("DSH_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.skip("no chromium on PATH (nox -s html_check installs the OS package)")
    return path


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    """A page of a headless Chromium that may load file:// URLs only."""
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's own sandbox refuses to start.
        browser = playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            tab = context.new_page()
            outside: list[str] = []
            tab.on(
                "request",
                lambda r: None if r.url.startswith(("file://", "data:")) else outside.append(r.url),
            )
            yield tab
            assert outside == [], f"the page fetched from outside: {outside}"
        finally:
            browser.close()


def _break(folder: Path) -> None:
    """Make the parent's expected tool result disagree with what the child answers."""
    log = folder / "session.jsonl"
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    changed = 0
    for row in rows:
        if row["type"] == "tool/result" and row["data"]["content"][0]["text"] == "FRESH":
            row["data"]["content"][0]["text"] = "STALE"
            changed += 1
    assert changed == 1, "subagent-mixed no longer has the tool result this test edits"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML report of a gate run over two scenarios, one of them broken."""
    base = tmp_path_factory.mktemp("gate") / "sdk"
    for name in ("subagent-mixed", "text-turn"):
        if not (SNAPSHOTS / name / "input.json").is_file():
            pytest.skip(f"scenario {name} is not committed")
        shutil.copytree(SNAPSHOTS / name, base / name, symlinks=True)
    _break(base / "subagent-mixed")
    target = base.parent / "report.html"
    run = subprocess.run(
        [SCRIPT, "replay", str(base), "--composition", "jsonl", "--html-report", str(target)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"HTML report: {target}" in run.stdout
    return target


def test_the_report_shows_pass_fail_diff_and_tree(page: Page, report: Path) -> None:
    page.goto(report.as_uri())
    expect(page.locator("h1")).to_have_text("dsh-snapshot gate report")
    expect(page.locator(".summary")).to_contain_text("1 passed, 1 failed")
    expect(page.locator("table.results tr[data-result=fail]")).to_have_count(1)
    expect(page.locator("table.results tr[data-result=pass]")).to_have_count(1)

    failed = page.locator("section[data-result=fail]")
    expect(failed).to_have_count(1)
    expect(failed.locator("h2")).to_contain_text("sdk/subagent-mixed")
    badge = failed.locator("h2 .badge.fail")
    expect(badge).to_be_visible()
    expect(badge).to_have_text("fail")
    expect(failed.locator("ul.failures li").first).to_contain_text(
        'expected "STALE", actual "FRESH"'
    )
    diff = failed.locator("pre.diff").first
    expect(diff).to_be_visible()
    expect(diff.locator(".del")).to_contain_text('"text":"STALE"')
    expect(diff.locator(".add")).to_contain_text('"text":"FRESH"')

    # The failing scenario's tree is open: the primary, a spawn child and a fork child.
    sessions = failed.locator("li.session")
    expect(sessions).to_have_count(3)
    for index in range(3):
        expect(sessions.nth(index)).to_be_visible()
    fork = failed.locator("li.session[data-kind=fork]")
    expect(fork.locator("li.seed-boundary")).to_be_visible()
    inherited = fork.locator("li.turn.inherited").first
    expect(inherited).to_be_visible()
    assert float(inherited.evaluate("e => getComputedStyle(e).opacity")) < 1
    expect(failed.locator(".tool", has_text="→ session.2.jsonl")).to_be_visible()

    # The passing scenario's tree is there, folded.
    passed = page.locator("section[data-result=pass]")
    expect(passed.locator("h2 .badge.pass")).to_have_text("pass")
    expect(passed.locator("li.session")).to_have_count(1)
    expect(passed.locator("li.session")).to_be_hidden()

    if SCREENSHOT:
        Path(SCREENSHOT).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOT, full_page=True)
    shot = page.screenshot(full_page=True)
    assert shot.startswith(b"\x89PNG")


def test_hostile_text_stays_text(page: Page, tmp_path: Path) -> None:
    """Markup and script in a recorded message show as text; nothing runs."""
    source = SNAPSHOTS / "text-turn"
    if not (source / "input.json").is_file():
        pytest.skip("text-turn is not committed")
    folder = tmp_path / "sdk" / "text-turn"
    shutil.copytree(source, folder, symlinks=True)
    hostile = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    log = folder / "session.jsonl"
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row["type"] == "assistant/message":
            row["data"]["content"] = [{"type": "text", "text": hostile}]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    target = tmp_path / "tree.html"
    shown = subprocess.run(
        [SCRIPT, "show", str(folder), "--html", str(target)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    page.goto(target.as_uri())
    expect(page.locator(".msg.final")).to_contain_text(hostile)
    assert page.evaluate("() => window.pwned === undefined")
    assert page.locator("img").count() == 0
