"""The documentation site as a reader sees it: every built page of ``docs/_build/html`` (``make docs``)
opened in headless Chromium, served from 127.0.0.1.

Each page fails the test on: a request to any other host (DevTools' network events; Chromium is also
told that no other host name resolves, so nothing leaves the machine), a console error, a request
the local server answers with an error, an image that did not load (``naturalWidth`` 0), and an
``<a href>`` inside the site that points at no built file, or at an anchor its page does not have.
Links to other hosts are links, not requests: they are allowed, and never followed. The site must
have a page for every Markdown file of docs/, every notebook and every metric of the catalogue, and
each metric's page its example chart.

``make test`` builds the site first (``make docs``); run alone, the test needs ``make docs`` run.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

import pytest
from chromium_lab import CHROMEDRIVER, CHROMIUM, chromium, quit_chromium, wait_for

from metrics_kit.spec.catalogue import default_catalogue

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "docs" / "_build" / "html"
HOST = "127.0.0.1"
# Every host name resolves to nothing, except this machine: a page that asks another host fails
# to reach it, and the request still shows in the performance log.
NO_OTHER_HOST = f"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE {HOST}"
NETWORK_SCHEMES = ("http", "https", "ws", "wss", "ftp")

if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    pytest.skip(
        f"needs {CHROMIUM} and {CHROMEDRIVER}: apt-get install chromium chromium-driver", allow_module_level=True
    )
pytest.importorskip("selenium")

# What the page holds once loaded: its anchors, its links, its images. Lazy images are loaded first.
PAGE = """
const done = arguments[arguments.length - 1];
const imgs = [...document.images];
for (const img of imgs) img.loading = 'eager';
Promise.all(imgs.map(img => img.complete ? null : new Promise(r => { img.onload = img.onerror = r; })))
  .then(() => document.fonts.ready)
  .then(() => done({
    ids: [...document.querySelectorAll('[id]')].map(e => e.id)
      .concat([...document.querySelectorAll('a[name]')].map(e => e.name)),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    images: imgs.map(img => ({src: img.currentSrc || img.src, width: img.naturalWidth})),
  }));
"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    failures: list[str]

    def log_message(self, format, *args):
        pass

    def log_request(self, code="-", size="-"):
        if int(code) >= 400:
            self.failures.append(f"{code} {self.path}")


@pytest.fixture(scope="module")
def site():
    """The built site on an ephemeral port of 127.0.0.1 (a thread of this process, shut down after);
    yields its base URL and the list of requests it answered with an error."""
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no built site in {SITE}: run `make docs` first (`make test` does)")
    failures: list[str] = []
    handler = type("Handler", (_Quiet,), {"failures": failures})
    server = http.server.ThreadingHTTPServer((HOST, 0), functools.partial(handler, directory=str(SITE)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}", failures
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(
        tmp_path_factory.mktemp("chromium-profile"), flags=(NO_OTHER_HOST,), logs=("browser", "performance")
    )
    yield driver
    quit_chromium(driver)


def pages() -> list[str]:
    """Every built page; _static/ holds the theme's assets (a template fragment among them), no page."""
    return sorted(
        p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html") if p.relative_to(SITE).parts[0] != "_static"
    )


def requested(driver) -> list[str]:
    """The URLs the page asked for since the last call (DevTools' Network.requestWillBeSent)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def foreign(url: str) -> bool:
    """A request over the network to a host other than this site's (data:, blob: and the browser's own
    chrome: pages are no request to a host)."""
    parts = urlsplit(url)
    return parts.scheme in NETWORK_SCHEMES and parts.hostname != HOST


def target_file(path: str) -> Path | None:
    """The built file a URL path names (a folder: its index.html), or None."""
    found = SITE / unquote(path).lstrip("/")
    if found.is_dir():
        found = found / "index.html"
    return found if found.is_file() else None


def test_every_page_loads_only_from_this_site_and_every_link_and_image_resolves(site, browser):
    base, server_failures = site
    every = pages()
    expected = {"index.html", "api.html", "getting-started.html", "notebooks.html", "generated/metrics/index.html"}
    expected |= {f"generated/metrics/{metric.name}.html" for metric in default_catalogue()}
    expected |= {f"generated/notebooks/{path.stem}.html" for path in (ROOT / "notebooks").glob("*.ipynb")}
    expected |= {f"{path.stem}.html" for path in (ROOT / "docs").glob("*.md")}
    assert sorted(expected - set(every)) == [], "pages missing from the built site"
    problems: list[str] = []
    anchors: dict[str, set[str]] = {}
    links: list[tuple[str, str]] = []
    browser.get("about:blank")
    requested(browser), browser.get_log("browser")  # what the browser did before the first page
    for page in every:
        browser.get(f"{base}/{page}")
        wait_for(lambda: browser.execute_script("return document.readyState") == "complete", 30, f"{page} to load")
        found = browser.execute_async_script(PAGE)
        anchors[page] = set(found["ids"])
        links += [(page, href) for href in found["links"]]
        problems += [f"{page}: image did not load: {img['src']}" for img in found["images"] if img["width"] == 0]
        if page.startswith("generated/metrics/") and page != "generated/metrics/index.html" and not found["images"]:
            problems.append(f"{page}: no example chart")
        problems += [f"{page}: request to another host: {url}" for url in requested(browser) if foreign(url)]
        problems += [
            f"{page}: console {entry['level']}: {entry['message']}"
            for entry in browser.get_log("browser")
            if entry["level"] == "SEVERE"
        ]
        problems += [f"{page}: the server answered {failure}" for failure in server_failures]
        server_failures.clear()
    for page, href in links:
        url, fragment = urldefrag(href)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.netloc != urlsplit(base).netloc:
            continue  # another host (a link, not a request), mailto:, javascript:
        target = target_file(parts.path)
        if target is None:
            problems.append(f"{page}: broken link {href}: no such file in the site")
            continue
        name = target.relative_to(SITE).as_posix()
        if fragment and name in anchors and unquote(fragment) not in anchors[name]:
            problems.append(f"{page}: broken link {href}: {name} has no anchor #{fragment}")
    assert not problems, f"{len(problems)} problems on {len(every)} pages:\n" + "\n".join(problems)
