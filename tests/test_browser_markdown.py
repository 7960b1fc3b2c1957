"""Real browser: a stranger's text is drawn as text (issue 23, item 2).

Image and link Markdown (``![](http://127.0.0.1:<listener>/img)``,
``[x](javascript:alert(1))``, a raw ``<img>``) is put into every field a stranger
controls: share-link parameters (a choice, an unknown key, ``?scenario=``, with
``%0A%0A`` to leave a code span), a stored scenario's name, description, tags and
revision note (the sidebar banner, the Scenarios page's messages and its History
diff), and a probed endpoint's error body (which also echoes the API key
upper-cased).  After each page settles: the listener received no request, the DOM
holds no ``<a href="javascript:…">`` and no element pointing at the listener, and
the payload is on the page as text.  Same server and Chromium set-up as
test_browser.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import pytest
from browser_support import CHROMIUM, LAUNCH_ARGS, chromium_or_skip, migrated_server, settled

chromium_or_skip()

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

from planner import Scenario  # noqa: E402
from planner.io.formatting import WORD_JOINER  # noqa: E402
from planner.store import make_engine, save_scenario, update_scenario  # noqa: E402

API_KEY = "sk-browser-Secret-0042"
# Every element that fetches or links: a stranger's URL must be on none of them.
_LINKS_JS = """port => Array.from(document.querySelectorAll(
    'a[href], img, image, iframe, source, video, audio, object, embed, link[href], [style*="url("]'))
  .map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('xlink:href')
            || e.getAttribute('data') || e.getAttribute('style') || '')
  .filter(u => /^\\s*javascript:/i.test(u) || u.includes('127.0.0.1:' + port))"""


class _Listener:
    """A loopback HTTP server that records every request (a fetched image, a prefetch)."""

    def __init__(self) -> None:
        seen: list[str] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                seen.append(self.path)
                self.send_response(204)
                self.end_headers()

            do_POST = do_HEAD = do_GET  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def _payloads(port: int) -> tuple[str, str, str]:
    return f"![](http://127.0.0.1:{port}/img)", "[x](javascript:alert(1))", f"<img src=http://127.0.0.1:{port}/raw>"


class _Endpoint:
    """A loopback "model server" that refuses every request with a hostile body."""

    def __init__(self, body: str) -> None:
        payload = body.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(403)
                self.send_header("Content-Type", "text/markdown")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def listener() -> Iterator[_Listener]:
    srv = _Listener()
    yield srv
    srv.httpd.shutdown()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, listener: _Listener) -> Iterator[tuple[str, str]]:
    """The app over a store holding one scenario whose text fields are all payloads (two versions)."""
    img, js, raw = _payloads(listener.port)
    db = tmp_path_factory.mktemp("md") / "ridgeline.db"
    with migrated_server(db) as url:
        engine = make_engine(f"sqlite:///{db}")
        first = save_scenario(engine=engine, scenario=Scenario(name=img), name=img, description=f"{js} {raw}",
                              tags=[img])
        update_scenario(engine=engine, ref=first.slug, expected_version=1,
                        scenario=Scenario(name=js, workload={"requests_per_s": 20.0}), name=f"{js} {raw}",
                        description=f"\n\n{img}", tags=[js], note=img)
        engine.dispose()
        yield url, first.slug


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield b
        b.close()


# A cold first page on a busy 2-core machine took 29 s here (later ones 8-12 s):
# the first wait of each page is longer than the helpers' default.
FIRST_RUN_MS = 120_000


def _open(browser: Browser, url: str) -> Page:
    page = browser.new_context(viewport={"width": 1400, "height": 1800}).new_page()
    page.goto(url)
    settled(page, timeout_ms=FIRST_RUN_MS)
    return page


def _text(page: Page) -> str:
    return str(page.evaluate("document.body.innerText")).replace(WORD_JOINER, "")


def _inert(page: Page, listener: _Listener) -> None:
    """Nothing fetched from the listener, nothing in the DOM links to it or to javascript:."""
    page.wait_for_timeout(500)  # an image inserted with the last render has been requested by now
    assert page.evaluate(_LINKS_JS, listener.port) == []
    assert listener.seen == []
    assert page.locator("[data-testid='stException']").count() == 0


def _nav(page: Page, title: str) -> None:
    page.locator("[data-testid='stSidebarNav'] a", has_text=title).first.click()
    settled(page, timeout_ms=FIRST_RUN_MS)


def test_link_parameters_are_text(site: tuple[str, str], browser: Browser, listener: _Listener) -> None:
    url, _ = site
    img, js, raw = _payloads(listener.port)
    query = "&".join([f"gpu={quote(chr(10) * 2 + img)}", f"{quote(chr(10) * 2 + img)}=1", f"model={quote(js)}",
                      f"{quote(raw)}=2"])
    page = _open(browser, f"{url}/?{query}")
    expect(page.get_by_text("is not a Ridgeline setting").first).to_be_visible()
    body = _text(page)
    assert img in body and js in body and raw in body  # each is shown, as typed
    _inert(page, listener)
    page.context.close()

    page = _open(browser, f"{url}/?scenario={quote(img)}")  # a reference that is no slug: the error repeats it
    expect(page.get_by_text("Share link ?scenario=").first).to_be_visible()
    assert img in _text(page)
    _inert(page, listener)
    page.context.close()


def test_a_stored_scenarios_text_is_text(site: tuple[str, str], browser: Browser, listener: _Listener) -> None:
    url, slug = site
    img, js, raw = _payloads(listener.port)
    page = _open(browser, f"{url}/?scenario={slug}")  # the banner names it
    expect(page.get_by_text("Saved scenario").first).to_be_visible()
    assert f"{js} {raw}" in _text(page)
    _inert(page, listener)
    _nav(page, "Scenarios")  # the list, the picked scenario's share line and its History diff
    expect(page.get_by_text("unchanged since it was loaded").first).to_be_visible()
    history = page.locator("[data-testid='stExpander']").filter(has_text="History (2 versions)").first
    history.locator("summary").click()
    table = history.locator("[data-testid='stTable']")
    expect(table).to_be_visible()
    cells = str(table.inner_text()).replace(WORD_JOINER, "")
    for shown in (img, f"{js} {raw}", js):  # name, description and tags of both versions
        assert shown in cells, cells
    _inert(page, listener)
    page.context.close()


def test_a_probed_endpoints_error_body_is_text_and_keyless(site: tuple[str, str], browser: Browser,
                                                          listener: _Listener) -> None:
    url, _ = site
    img, js, raw = _payloads(listener.port)
    endpoint = _Endpoint(f"# Forbidden\n\n{img}\n\n{js} {raw}\n\ntoken={API_KEY.upper()} [Sign in](javascript:x)")
    try:
        page = _open(browser, f"{url}/probe")
        main = page.get_by_test_id("stMainBlockContainer")
        expect(main.get_by_label("Endpoint URL", exact=True)).to_be_visible(timeout=FIRST_RUN_MS)
        for label, value in (("Endpoint URL", endpoint.url), ("API key (kept in memory only)", API_KEY),
                             ("Concurrency levels", "1"), ("Requests per level", "1"), ("Output tokens", "2")):
            box = main.get_by_label(label, exact=True)
            box.fill(value)
            box.press("Enter")
            settled(page)
        page.get_by_role("button", name="Run probe").click()
        expect(page.get_by_text("requests failed: http_403").first).to_be_visible(timeout=90_000)
        settled(page)
        detail = page.locator("[data-testid='stCode']").filter(has_text="Forbidden").first
        expect(detail).to_be_visible()
        said = str(detail.inner_text())
        assert img in said and "[redacted]" in said  # the body as text, the key's echo gone
        assert API_KEY.lower() not in _text(page).lower()
        _inert(page, listener)
        page.context.close()
    finally:
        endpoint.httpd.shutdown()


def test_the_listener_counts_what_a_browser_fetches(browser: Browser, listener: _Listener, tmp_path: Path) -> None:
    """The check can fail: a page that does draw the image makes the listener count it."""
    img, _, _ = _payloads(listener.port)
    page = browser.new_context().new_page()
    page.set_content(f'<img src="{img[4:-1]}">')
    page.wait_for_timeout(500)
    assert listener.seen == ["/img"]
    listener.seen.clear()
    page.context.close()
