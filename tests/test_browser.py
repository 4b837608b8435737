"""The built book in a real headless browser (Debian's chromium and chromedriver, driven by
Selenium; no browser is downloaded): pages load without JavaScript errors from our own content,
search finds a chapter, launch links point at the course's home, widgets show their static view,
tables read as tables, no solution text is on any page, every page passes axe-core's WCAG 2.1 AA
rules, and formulas render with MathJax served by the site itself.

Run locally with ``apt-get install chromium chromium-driver`` and ``npm ci --prefix book``
(axe-core; ``make setup`` runs it); without them these tests skip, except in CI (``CI`` set),
where a missing browser or axe-core is a failure.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path

import pytest
from chapters import REPO

from autograder.release.home import read_home
from autograder.release.publish import secret_lines

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
AXE = REPO / "book" / "node_modules" / "axe-core" / "axe.min.js"
#: The WCAG 2.1 AA rules of axe-core (A and AA success criteria of WCAG 2.0 and 2.1).
WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
CHAPTERS = sorted(p.relative_to(REPO).with_suffix("").as_posix()
                  for p in REPO.glob("notebooks/*/*.ipynb"))


def _missing_browser() -> str:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    if not (CHROMIUM and CHROMEDRIVER):
        return "chromium and chromedriver are not installed (apt-get install chromium " \
               "chromium-driver)"
    return ""


if _missing_browser():
    if os.environ.get("CI"):
        pytest.fail(f"browser tests cannot run in CI: {_missing_browser()}", pytrace=False)
    pytest.skip(_missing_browser(), allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = [pytest.mark.kernel, pytest.mark.book, pytest.mark.browser]


@pytest.fixture(scope="module")
def server(site):
    """The built site on a free localhost port, as a static host would serve it."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


#: (path, status) of every request the site's server answered, in order.
SERVED: list[tuple[str, int]] = []


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        SERVED.append((self.path, int(code)))


@pytest.fixture(scope="module")
def browser():
    os.environ.setdefault("SE_OFFLINE", "true")   # Selenium Manager must not download anything
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-dev-shm-usage",
                 "--window-size=1280,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _open(browser, url: str) -> None:
    browser.get(url)
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete")


def _console(browser, origin: str) -> tuple[list[str], list[str]]:
    """SEVERE console entries caused by our own site, in two lists: those of the page (its
    scripts, and the files it asked for), and failed requests the browser made on its own (a
    page that declares no icon gets a request for /favicon.ico). A file the page asked for is
    in its Resource Timing entries, which list failed loads too; a request of the browser's own
    is not. A resource from another host that cannot load (this machine has no internet:
    MathJax, the widget manager from a CDN) is not our content."""
    asked = set(browser.execute_script(
        "return [document.URL, ...performance.getEntries().map(e => e.name)]"))
    page, own = [], []
    for entry in browser.get_log("browser"):
        message = entry["message"]
        if entry["level"] != "SEVERE":
            continue
        if "Failed to load resource" in message and not message.startswith(origin):
            continue                               # an external file that did not load
        if message.startswith(("https://", "http://")) and not message.startswith(origin):
            continue                               # raised inside an external script
        failed = message.split(" ")[0] if "Failed to load resource" in message else None
        (own if failed and failed not in asked else page).append(message)
    return page, own


def _pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if "_static" not in p.parts and "_sources" not in p.parts)


def test_every_page_loads_without_javascript_errors_from_our_content(site, server, browser):
    pages = _pages(site)
    assert len(pages) >= len(CHAPTERS) + 4
    broken = {}
    for page in pages:
        _open(browser, f"{server}/{page}")
        errors, _ = _console(browser, server)   # the browser's own: the next test
        if errors:
            broken[page] = errors
    assert broken == {}


def test_the_browsers_own_request_for_an_icon_finds_one(site, server, browser):
    """Chromium asks for /favicon.ico on its own on a page that declares no icon (the redirect
    page index.html, a page's source text), a moment after the page loads; the site answers
    with an icon, and the console has no failed request of the browser's own."""
    browser.execute_cdp_cmd("Network.clearBrowserCache", {})   # ask the server, not the cache
    del SERVED[:]
    _open(browser, f"{server}/_sources/book/intro.md")
    WebDriverWait(browser, 30).until(lambda _: ("/favicon.ico", 200) in SERVED
                                     or ("/favicon.ico", 404) in SERVED)
    assert [status for path, status in SERVED if path == "/favicon.ico"] == [200]
    assert _console(browser, server)[1] == []
    assert (site / "favicon.ico").read_bytes()[:4] == b"\x00\x00\x01\x00", "not an icon file"


def test_search_finds_a_chapter(server, browser):
    _open(browser, f"{server}/search.html?q=roofline")
    # Sphinx lists the results one by one (5 ms apart) and writes the summary when all are in.
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "#search-results .search-summary").text)
    links = [a.get_attribute("href")
             for a in browser.find_elements(By.CSS_SELECTOR, "#search-results li a")]
    assert any("notebooks/05_bottlenecks/bottlenecks.html" in link for link in links), links


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_launch_links_point_at_the_course_home_and_the_student_notebook(server, browser,
                                                                         chapter):
    home = read_home(REPO)
    _open(browser, f"{server}/{chapter}.html")
    hrefs = {a.get_attribute("href") for a in browser.find_elements(By.TAG_NAME, "a")}
    notebook = f"{chapter}.ipynb"
    assert home.binder(notebook) in hrefs, "Binder button or launch note"
    assert home.colab(notebook) in hrefs, "Colab button or launch note"
    launches = [h for h in hrefs if h and ("mybinder.org" in h or "colab.research" in h)]
    assert all(h in (home.binder(notebook), home.colab(notebook)) for h in launches), launches


def _visible_images(browser, selector: str) -> list[tuple[int, int]]:
    return browser.execute_script("""
        return [...document.querySelectorAll(arguments[0])]
          .filter(img => img.complete && img.naturalWidth > 0 && img.offsetParent !== null)
          .map(img => [img.getBoundingClientRect().width, img.getBoundingClientRect().height]);
    """, selector)


def test_an_explorer_shows_its_figure_without_the_widget_library(server, browser):
    _open(browser, f"{server}/notebooks/01_parameters/parameters.html")
    shown = _visible_images(browser, ".tinyprof-explorer-static img")
    assert len(shown) >= 2, "each explorer of chapter 1 shows its initial figure"
    assert all(width > 200 and height > 100 for width, height in shown), shown
    text = browser.find_element(By.CSS_SELECTOR, ".tinyprof-explorer-static").text
    assert "124,439,808 parameters" in text


#: How the description of each tinyprof figure begins (tinyprof/plots/); "Figure" is the
#: generic one of a DescribedFigure drawn by chapter code.
FIGURE_KINDS = ("Bar chart: ", "Stacked area chart: ", "Stacked bar chart: ", "Line chart: ",
                "Amdahl's law: ", "Roofline chart, log-log: ", "Histogram of time per call: ",
                "A/B test in two panels. ", "Two panels. Left: Histogram of time per call",
                "Benchmark suite of ", "Timeline chart, a lane per thread: ", "Figure")
#: Figures drawn by a chapter's own matplotlib code that the chapter has not yet made a
#: ``tp.plots.DescribedFigure`` (chapter 04's first-calls plot is one now), by chapter.
UNDESCRIBED: dict[str, int] = {}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_figure_says_what_it_shows(server, browser, chapter):
    """Each figure's alt text is its description (title, axes, key numbers), not a file name."""
    _open(browser, f"{server}/{chapter}.html")
    figures = browser.execute_script("""
        return [...document.querySelectorAll('.cell_output img')]
          .map(img => [img.getAttribute('alt') || '', img.naturalWidth]);
    """)
    assert len(figures) >= 2, f"{chapter} shows {len(figures)} figures"
    assert all(width > 200 for _, width in figures), "a figure did not load"
    file_names = [alt for alt, _ in figures if re.search(r"\.(png|jpe?g|gif|svg)$", alt)]
    assert len(file_names) == UNDESCRIBED.get(chapter, 0), \
        f"{chapter}: figures whose alt text is a file name: {file_names}"
    for alt, _ in figures:
        if alt not in file_names:
            assert alt.startswith(FIGURE_KINDS), alt[:80]
            assert len(alt) >= 80 and re.search(r"\d", alt), f"alt text says too little: {alt!r}"


def test_test_cells_are_folded_and_open_from_the_keyboard(server, browser):
    _open(browser, f"{server}/notebooks/02_flops/flops.html")
    shown = browser.execute_script("return document.body.innerText")
    assert "def matmul_flops(" in shown                    # the exercise stays in view
    assert "expect(matmul_flops(" not in shown             # its tests are folded
    toggle = browser.find_element(By.CSS_SELECTOR, "details.above-input > summary")
    assert toggle.text == "Show the tests"
    browser.execute_script("arguments[0].focus()", toggle)
    assert browser.switch_to.active_element == toggle, "the fold's toggle takes the focus"
    toggle.send_keys(Keys.ENTER)
    assert "expect(matmul_flops(" in browser.execute_script("return document.body.innerText")
    assert toggle.text == "Hide the tests"


def test_tables_read_as_tables(server, browser):
    _open(browser, f"{server}/notebooks/01_parameters/parameters.html")
    cells = browser.execute_script("""
        const table = document.querySelector('table.tinyprof-table');
        const row = table.querySelector('tbody tr');
        return [...row.children].map(td => {
          const style = getComputedStyle(td), box = td.getBoundingClientRect();
          return [parseFloat(style.paddingLeft) + parseFloat(style.paddingRight),
                  box.left, box.right, td.scrollWidth <= td.clientWidth + 1];
        });
    """)
    assert len(cells) >= 3
    assert all(padding >= 8 for padding, *_ in cells), "cells need room between them"
    assert all(fits for *_, fits in cells), "no cell's text overflows its box"
    edges = [(left, right) for _, left, right, _ in cells]
    assert all(a[1] <= b[0] + 0.5 for a, b in zip(edges, edges[1:])), "cells overlap"


def test_no_page_shows_solution_text(site, server, browser):
    secrets, _ = secret_lines(REPO)   # minus lines the student notebooks show anyway
    for page in [f"{chapter}.html" for chapter in CHAPTERS] + ["book/cheatsheet.html"]:
        _open(browser, f"{server}/{page}")
        text = browser.execute_script("return document.body.innerText")
        shown = [line for line in secrets if line in text]
        assert shown == [], f"{page} shows solution text: {shown[0]!r}"


def _axe_source() -> str:
    if not AXE.exists():
        message = (f"axe-core is not installed: {AXE.relative_to(REPO)} is missing (`make setup` "
                   "runs `npm ci --prefix book`)")
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return AXE.read_text(encoding="utf-8")


def _maths_typeset(browser) -> bool | None:
    """Wait until MathJax has typeset the page: True when it has, False when it did not load or
    failed, None on a page without formulas (which does not load MathJax)."""
    browser.set_script_timeout(60)
    return browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        if (!document.querySelector('script[src*="mathjax" i]')) { done(null); return; }
        const wait = (tries) => {
          if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
            MathJax.startup.promise.then(() => done(true), () => done(false));
          } else if (tries > 0) { setTimeout(() => wait(tries - 1), 100); }
          else { done(false); }
        };
        wait(50);
    """)


def _axe_violations(browser, source: str) -> list[str]:
    """axe-core's WCAG 2.1 AA violations on the open page, one line per rule and element."""
    browser.execute_script(source)
    browser.set_script_timeout(120)
    found = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        axe.run(document, {runOnly: {type: 'tag', values: arguments[0]},
                           resultTypes: ['violations']})
          .then(result => done(result.violations.map(v => ({
                  id: v.id, impact: v.impact,
                  nodes: v.nodes.map(n => [n.target.join(' '), n.failureSummary])}))),
                error => done([{id: 'axe failed', impact: String(error), nodes: []}]));
    """, WCAG_21_AA)
    return [f"{v['id']} ({v['impact']}): {target} :: {summary}"
            for v in found for target, summary in (v["nodes"] or [("", "")])]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_meets_wcag_21_aa(site, server, browser, scheme):
    """axe-core finds no WCAG 2.1 A or AA violation on any page, after MathJax has typeset
    the formulas, in the light and in the dark theme (the book follows the reader's setting)."""
    source = _axe_source()
    failures = {}
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": scheme}]})
    try:
        for page in _pages(site):
            _open(browser, f"{server}/{page}")
            assert browser.execute_script(
                "return document.documentElement.dataset.theme") == scheme, page
            _maths_typeset(browser)
            violations = _axe_violations(browser, source)
            if violations:
                failures[page] = violations
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert failures == {}, "\n".join(f"{page}: {line}" for page, lines in failures.items()
                                     for line in lines[:8])


def _formulas(browser) -> list[list]:
    """Each formula on the page: [typeset by MathJax, has MathML for assistive technology, its
    text when not typeset]."""
    return browser.execute_script("""
        return [...document.querySelectorAll('span.math, div.math')].map(m => [
          m.querySelector('mjx-container') !== null,
          m.querySelector('mjx-assistive-mml math') !== null,
          m.querySelector('mjx-container') ? '' : m.textContent.slice(0, 80)]);
    """)


def test_formulas_render_from_a_saved_copy_with_the_network_off(site, browser):
    """The site serves its own MathJax: opened from disk (file://) with the browser offline, every
    formula on every page that has one is typeset, with hidden MathML for screen readers."""
    pages = [page for page in _pages(site)
             if 'class="math' in (site / page).read_text(encoding="utf-8")]
    assert len(pages) >= 4, f"only {pages} have formulas"
    for page in pages:
        scripts = re.findall(r'<script[^>]* src="([^"]*mathjax[^"]*)"',
                             (site / page).read_text(encoding="utf-8"), flags=re.I)
        assert scripts and all("_static/mathjax/" in src and "//" not in src
                               for src in scripts), f"{page} loads MathJax from {scripts}"
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    try:
        counted = {}
        for page in pages:
            _open(browser, (site / page).as_uri())
            assert _maths_typeset(browser) is True, f"MathJax did not load on {page}"
            formulas = _formulas(browser)
            raw = [text for typeset, _, text in formulas if not typeset]
            assert raw == [], f"{page} shows raw TeX: {raw[:3]}"
            assert all(mathml for _, mathml, _ in formulas), f"{page}: a formula has no MathML"
            counted[page] = len(formulas)
    finally:
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        browser.execute_cdp_cmd("Network.disable", {})
    assert sum(counted.values()) >= 20, counted
