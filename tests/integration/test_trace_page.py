"""The trace page in a real browser: headless Chromium (Debian's ``chromium`` package) driven by
Playwright for Python, with the embedded model's generation and with a synthetic thousand-step
trace.

``make test`` installs both (the Makefile's deps step). Where either is missing these tests
fail and say how to install it: a page no browser opened is not tested.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.unit.synthetic_traces import synthetic_trace

from logitgate.trace import Trace

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "trace.md"
PNG = b"\x89PNG\r\n\x1a\n"
# Where a browser step waits at most (milliseconds): far above what it takes, so a hang fails.
WAIT_MS = 30_000


def _chromium() -> str:
    path = os.environ.get("LOGITGATE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(
            "chromium not found: the trace page tests need Debian's chromium package "
            "(apt-get install -y chromium, which `make test` runs as root) or LOGITGATE_CHROMIUM=/path/to/chromium"
        )
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install playwright (make test installs it)")
    with sync_playwright() as p:
        # --no-sandbox: Chromium's sandbox refuses to run as root, which CI machines are.
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox"], timeout=WAIT_MS)
        yield b
        b.close()


class _Opened:
    """A page opened from a file, with every request and error it made."""

    def __init__(self, browser: Any, path: Path, fragment: str = "") -> None:
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page = browser.new_page(viewport={"width": 1200, "height": 800})
        self.page.set_default_timeout(WAIT_MS)
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.url = path.resolve().as_uri() + fragment
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready]")

    def text(self, selector: str) -> str:
        return str(self.page.inner_text(selector))

    def count(self, selector: str) -> int:
        return int(self.page.locator(selector).count())

    def check_self_contained(self) -> None:
        assert self.errors == []
        assert [u.split("#")[0] for u in self.requests] == [self.url.split("#")[0]]  # nothing fetched


def _doc_command(prefix: str) -> list[str]:
    """The command line of docs/trace.md that starts with ``prefix``, split as a shell would."""
    for block in re.findall(r"```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S):
        for line in block.splitlines():
            if line.startswith(prefix):
                return shlex.split(line)
    pytest.fail(f"docs/trace.md has no command starting with {prefix!r}")


def _embedded_trace(page: str) -> Trace:
    m = re.search(r'<script id="trace-data" type="application/json">(.*?)</script>', page, re.S)
    assert m is not None
    return Trace.from_dict(json.loads(m.group(1)))


@pytest.mark.timeout(300)
def test_trace_page_of_a_generation(
    browser: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commands of docs/trace.md on the embedded model (the page, then its screenshot), then
    the page in the browser: the step count, a click on the severity step and its details, a
    click on a forced token, the arrow keys."""
    pytest.importorskip("transformers")
    from logitgate.cli.main import main

    page_file = tmp_path / "trace.html"
    argv = _doc_command("logitgate generate ")[1:]
    argv[argv.index("trace.html")] = str(page_file)
    monkeypatch.chdir(REPO)  # the docs' paths are the repository's
    assert main([*argv, "--no-stream"]) == 0
    out, err = capsys.readouterr()
    trace = _embedded_trace(page_file.read_text(encoding="utf-8"))
    assert json.loads(out)["severity"] in {"low", "medium", "high", "critical"}
    assert f"trace of {len(trace)} steps written to {page_file}" in err
    assert trace.text == out.strip() and trace.kind == "json" and trace.complete

    opened = _Opened(browser, page_file)
    assert opened.text("#step-count") == str(len(trace))
    assert opened.count("#timeline .cell") == len(trace)
    assert opened.count("#output .tok") == sum(st.span[1] > st.span[0] for st in trace)
    assert opened.text("#output") == trace.text
    assert opened.text("#d-step") == "0"  # the first step is selected on load

    # The step that wrote the severity: few tokens allowed, the model's favourites before and after.
    st = min((s for s in trace if s.position == "/severity" and not s.forced), key=lambda s: s.allowed)
    opened.page.click(f"#timeline .cell[data-step='{st.step}']")
    assert opened.text("#d-step") == str(st.step)
    assert opened.text("#d-token").startswith(st.text)
    assert opened.text("#d-allowed").startswith(f"{st.allowed:,} of 49,152 tokens")
    assert opened.text("#d-position") == "/severity"
    assert opened.count("#details .bars .row") == len(st.top_before) + len(st.top_after)
    assert opened.count("#details .bars .row.masked") == sum(t.masked for t in st.top_before)
    assert opened.count("#details .bars .row.chosen") == 1 + any(t.token_id == st.token_id for t in st.top_before)
    assert opened.count(f"#output .tok.sel[data-step='{st.step}']") == 1
    assert "#step=" in opened.page.url

    # A forced token, clicked in the output text; then the next step with the arrow key.
    forced = next(s for s in trace if s.forced and s.span[1] > s.span[0])
    opened.page.click(f"#output .tok[data-step='{forced.step}']")
    assert opened.text("#d-step") == str(forced.step)
    assert "forced" in opened.text("#details h3") and opened.text("#d-allowed").startswith("forced")
    opened.page.keyboard.press("ArrowRight")
    assert opened.text("#d-step") == str(forced.step + 1)

    shot = tmp_path / "clicked.png"
    opened.page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == PNG and shot.stat().st_size > 10_000
    opened.check_self_contained()
    opened.page.close()

    # The screenshot command of the docs (docs/images/trace.png), on this page.
    doc_shot = tmp_path / "trace.png"
    cmd = [_chromium()]
    for a in _doc_command("chromium ")[1:]:
        a = a.replace("--screenshot=docs/images/trace.png", f"--screenshot={doc_shot}")
        cmd.append(a.replace("file://$PWD/trace.html", page_file.as_uri()))
    subprocess.run(cmd, check=True, timeout=120, capture_output=True)
    assert doc_shot.read_bytes()[:8] == PNG and doc_shot.stat().st_size > 10_000


@pytest.mark.timeout(120)
def test_thousand_steps_render_at_once(browser: Any, tmp_path: Path) -> None:
    """A synthetic 1,000-step trace: every step on the timeline and in the text, the last one
    selectable by the address (``#step=999``), another clickable. The page's render time is
    printed for the record; timing is a benchmark's business, not an assertion here."""
    trace = synthetic_trace(1000)
    page_file = tmp_path / "big.html"
    page_file.write_text(trace.to_html(), encoding="utf-8")
    opened = _Opened(browser, page_file, "#step=999")
    assert opened.text("#step-count") == "1000"
    assert opened.count("#timeline .cell") == 1000 and opened.count("#output .tok") == 1000
    assert opened.count("#timeline .cell.forced") == sum(st.forced for st in trace)
    assert opened.count("#timeline .cell.budget") == sum(st.budget_shaped for st in trace)
    assert opened.text("#d-step") == "999" and opened.text("#d-position") == "/items/999"
    render_ms = float(opened.page.get_attribute("body", "data-render-ms"))
    print(f"rendering 1,000 steps took {render_ms:.0f} ms")
    opened.page.click("#timeline .cell[data-step='500']")
    assert opened.text("#d-step") == "500"
    opened.check_self_contained()
    opened.page.close()
