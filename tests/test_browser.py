"""The built book in a real headless browser (Debian's chromium and chromedriver, driven by
Selenium; no browser is downloaded): pages load without JavaScript errors from our own content,
search finds a chapter, launch links point at the course's home, widgets show their static view,
tables read as tables, and no solution text is on any page.

Run locally with ``apt-get install chromium chromium-driver``; without them these tests skip,
except in CI (``CI`` set), where a missing browser is a failure.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest
from chapters import REPO

from autograder.home import read_home
from autograder.publish import secret_lines

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
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
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def server(site):
    """The built site on a free localhost port, as a static host would serve it."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


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


def _own_errors(browser, origin: str) -> list[str]:
    """SEVERE console entries caused by our own pages, scripts and files. A resource from
    another host that cannot load (this machine has no internet: MathJax, the widget manager
    from a CDN) is not our content."""
    errors = []
    for entry in browser.get_log("browser"):
        message = entry["message"]
        if entry["level"] != "SEVERE":
            continue
        if "Failed to load resource" in message and not message.startswith(origin):
            continue                               # an external file that did not load
        if message.startswith(("https://", "http://")) and not message.startswith(origin):
            continue                               # raised inside an external script
        errors.append(message)
    return errors


def _pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if "_static" not in p.parts and "_sources" not in p.parts)


def test_every_page_loads_without_javascript_errors_from_our_content(site, server, browser):
    pages = _pages(site)
    assert len(pages) >= len(CHAPTERS) + 4
    broken = {}
    for page in pages:
        _open(browser, f"{server}/{page}")
        errors = _own_errors(browser, server)
        if errors:
            broken[page] = errors
    assert broken == {}


def test_search_finds_a_chapter(server, browser):
    _open(browser, f"{server}/search.html?q=roofline")
    WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#search-results li a"))
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
