"""The built site as a reader's browser sees it.

Chromium (Debian's, driven by Playwright) visits every page of
``_build/html``, served over HTTP from 127.0.0.1, in up to three views, each
from a fresh browser profile: at desktop width in the theme's light mode and
in its dark mode, and at phone width (several browsers at once, each with a
share of the pages). Every page gets the first view; the API reference's
entries, one template around a docstring, get the other two as
``tests/support/survey_plan.py`` plans them. What it sees is collected once per session
(``survey``), and each test below checks one property of it: pages load
without console errors, images decode, links resolve, requests stay on the
serving host, nothing scrolls sideways on a phone, text is readable in both
modes, figures sit on a light panel in dark mode, and every tutorial carries
the record of the run that produced it. Screenshots of every page go to
``_build/screenshots/`` for people to look at; under CI, where nobody looks,
none are taken (a third of the survey's time).

Locally the module skips when no browser is installed; under CI (the ``CI``
environment variable set) a missing browser is a failure.
"""

import concurrent.futures
import functools
import http.server
import json
import os
import re
import shutil
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import pytest

from pagelib import layout, records, translation
from tests.support import survey_plan
from tests.support.helpers import EXAMPLES, GALLERY_DIR, REPO, in_ci

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Every host but the one serving the site is unknown: a request for one
    # is still seen (and fails the test) but never leaves the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
# Folders of the build that hold assets and copies rather than pages to read.
NOT_PAGES = {"_static", "_sources", "_downloads", "_images"}
SCREENSHOTS = REPO / "_build" / "screenshots"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# WCAG 2 AA: 4.5 for body-size text, 3 for large text (24px, or 18.66px bold).
MINIMUM_CONTRAST = 4.5
MINIMUM_CONTRAST_LARGE = 3.0
TUTORIALS = [f"{GALLERY_DIR}/{name}.html" for name in EXAMPLES]
(CHINESE,) = layout.TRANSLATIONS


def missing(reason):
    """Skip locally, fail in CI: CI must run every browser check."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so the browser tests must run)")
    pytest.skip(reason)


# Chromium's headless shell first (Debian's chromium-headless-shell: the same
# Blink and V8 without the browser's interface), which renders the survey
# for a quarter less CPU than the full browser; the full one where it is the
# only one (a developer's machine, GitHub's runner with Google Chrome).
CHROMIUMS = ["chromium-headless-shell", "chromium"]


def find_chromium():
    for name in CHROMIUMS:
        for candidate in [f"/usr/bin/{name}", shutil.which(name)]:
            if candidate and os.access(candidate, os.X_OK):
                return candidate
    return None


# -- Serving the site -----------------------------------------------------------


# axe-core is served beside the site, at a path no build writes (the deployed
# site holds no dot-folders), and loaded by its address: the browser then
# keeps its compiled code from one visit to the next. Injected as text, it
# was compiled again on every page (0.06 to 0.12 core-seconds a visit).
AXE_PATH = "/.survey/axe.min.js"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    # Connections kept open between requests: a page asks for about twenty
    # files, and the survey's browsers ask at once.
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def translate_path(self, path):
        if urlsplit(path).path == AXE_PATH:
            return AXE_CORE
        return super().translate_path(path)


class QuietServer(http.server.ThreadingHTTPServer):
    # socketserver's default backlog is 5 connections waiting to be accepted:
    # with several browsers loading pages, the kernel dropped the rest, and a
    # dropped connection is retried after 1, 3, 7 s... (358 such drops on
    # this machine over a few runs of the suite); axe-core gives up on a
    # stylesheet it fetches after 10 s, which the survey saw as a page's
    # failed request.
    request_queue_size = 1024

    def handle_error(self, request, client_address):
        # A tab closed while a file was still being sent is how a browser
        # works, not a server error; anything else is reported as usual.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="session")
def served(site):
    """Serve ``_build/html`` on an ephemeral port of 127.0.0.1."""
    if not (site.html / "index.html").exists():
        pytest.fail(
            f"no site to browse: the build wrote no index.html\n{site.warnings}"
        )
    handler = functools.partial(QuietHandler, directory=str(site.html))
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("Playwright is not installed")
    executable = find_chromium()
    if executable is None:
        missing(f"no Chromium found in /usr/bin or on PATH (any of {CHROMIUMS})")
    if not AXE_CORE or not Path(AXE_CORE).is_file():
        missing("axe-core is not installed (AXE_CORE); run the tests with `make test`")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


# -- What a visit collects --------------------------------------------------------

# The scripts a visit runs in the page, one function each, in tests/browser/.
SCRIPTS = Path(__file__).parent / "browser"


def browser_script(name):
    return (SCRIPTS / f"{name}.js").read_text().rstrip("\n")


# Runs in the page: whether the verified stamp comes before the first code.
STAMP_BEFORE_CODE_JS = browser_script("stamp_before_code")

# Runs in the page: every image, waited for until it has decoded (or failed).
IMAGES_JS = browser_script("images")

# Runs in the page: links, code blocks and copy buttons.
LINKS_JS = browser_script("links")

# Runs in the page: what sticks out to the right of the viewport. Code blocks
# may scroll inside themselves; nothing else may scroll or be cut off.
OVERFLOW_JS = browser_script("overflow")

# Runs in the page: the contrast of every visible piece of text against what
# lies behind it, and the backdrop of every gallery figure.
CONTRAST_JS = browser_script("contrast")


@dataclass
class Visit:
    """What one page showed in one viewport and colour mode."""

    console_errors: list = field(default_factory=list)
    requests: list = field(default_factory=list)
    images: list = field(default_factory=list)
    links: dict = field(default_factory=dict)
    overflow: dict = field(default_factory=dict)
    contrast: dict = field(default_factory=dict)
    accessibility: dict = field(default_factory=dict)
    stamp: dict | None = None
    prose: dict = field(default_factory=dict)  # Chinese pages only


@dataclass
class Survey:
    base: str
    pages: list
    visits: dict  # (page, "desktop"/"phone", "light"/"dark") -> Visit
    html: Path
    requests: list  # every URL the browser asked for during the survey
    colour: set  # the visits whose axe audit ran the rules that judge colours


def site_pages(html_dir):
    return sorted(
        p.relative_to(html_dir).as_posix()
        for p in html_dir.rglob("*.html")
        if not NOT_PAGES & set(p.relative_to(html_dir).parts)
    )


# axe-core (installed by `make test`), the WCAG 2.1 A and AA rules, and the
# rule that the theme's search button broke (experimental in axe, so named);
# its rules that judge colours only where survey_plan.colour_sample says.
AXE_CORE = os.environ.get("AXE_CORE", "")
AXE_JS = browser_script("axe")


# -- English prose in the Chinese edition ----------------------------------------

# Runs in the page: the text a reader sees or hears outside code, program
# output and the edition switcher (which names "English" by design): every
# text node, the page's title, and the attributes that browsers show or
# screen readers speak (tooltips, labels, placeholders, alt text).
PROSE_JS = browser_script("prose")


def english_prose(prose):
    """The English phrases of one page's collected prose, each once."""
    found = []
    for text in [*prose.get("texts", []), *prose.get("attributes", [])]:
        for phrase in translation.english_phrases(text):
            if phrase not in found:
                found.append(phrase)
    return found


def audit_accessibility(page, colour):
    """{"rules": the ids of the rules that ran, "violations": [...]}."""
    page.add_script_tag(url=urljoin(page.url, AXE_PATH))
    return page.evaluate(AXE_JS, [survey_plan.COLOUR_RULES, colour])


# How long each page is watched after it loaded. Its timers are fast-forwarded
# by this much (Playwright's clock), so a script that fetches or fails a few
# seconds after load does so while we watch, without the survey waiting.
WATCH_AFTER_LOAD_MS = 60_000


# A visit reads the page once it has had no request in flight for this long
# (Playwright's "networkidle" waits as long): what the page fetched, late
# fetches included, has then arrived or failed. The requests are the ones the
# tab's listeners saw, not Chromium's own count of open connections, on which
# "networkidle" waits: in the headless shell that count once stayed above
# zero for 30 s on a page whose requests had all finished (no request in
# flight, as seen by the tab, when the wait timed out).
QUIET_MS = 500
SETTLE_TIMEOUT_S = 30


def settle(tab):
    """Wait until ``tab``'s page has had no request in flight for QUIET_MS;
    fail naming the requests still in flight after SETTLE_TIMEOUT_S."""
    start = quiet_since = time.monotonic()
    while True:
        tab.page.wait_for_timeout(100)  # the tab's events arrive meanwhile
        now = time.monotonic()
        if tab.in_flight:
            quiet_since = now
        elif now - quiet_since >= QUIET_MS / 1000:
            return
        if now - start > SETTLE_TIMEOUT_S:
            pending = sorted(request.url for request in tab.in_flight)
            raise TimeoutError(
                f"{tab.page.url}: {SETTLE_TIMEOUT_S} s on, still in flight: {pending}"
            )


class Tab:
    """One tab, reused for every visit in its context. A fresh tab per visit
    starts a renderer process each time, which cost the survey more than half
    of its CPU; the context, made fresh for each view, is what keeps visits
    apart (no stored theme choice, no cache from another view). The tab's
    listeners write into the visit under way."""

    def __init__(self, context):
        self.result = Visit()
        self.in_flight = set()  # the page's requests not yet finished or failed
        self.page = page = context.new_page()
        page.on(
            "console",
            lambda msg: (
                self.result.console_errors.append(f"console: {msg.text}")
                if msg.type == "error"
                else None
            ),
        )
        page.on(
            "pageerror", lambda exc: self.result.console_errors.append(f"error: {exc}")
        )
        page.on("request", self.request_started)
        page.on("requestfinished", self.request_finished)
        page.on("requestfailed", self.request_failed)
        self.leaving = False
        # Playwright's clock stays installed across the tab's navigations.
        page.clock.install()

    def request_started(self, request):
        self.result.requests.append(request.url)
        self.in_flight.add(request)

    def request_finished(self, request):
        self.in_flight.discard(request)

    def request_failed(self, request):
        self.in_flight.discard(request)
        # A visit ends by leaving the page, and the browser then cancels what
        # it still had in flight for it (net::ERR_ABORTED): the favicon, which
        # Chromium asks for on its own schedule, was once cancelled that way.
        # That cancellation is the survey's doing; any other failure, and any
        # error the page raises as it unloads, is still the page's.
        if self.leaving and request.failure == "net::ERR_ABORTED":
            return
        self.result.console_errors.append(
            f"request failed: {request.url} ({request.failure})"
        )


def visit(tab, base, page_path, width_name, mode, shots, audit, colour):
    """Load one page in ``tab`` and collect what the tests need; ``audit``:
    whether axe audits it (survey_plan.audited), ``colour``: whether with the
    rules that judge colours."""
    result = tab.result = Visit()
    tab.leaving = False
    tab.in_flight.clear()  # the last page's, cancelled as the tab left it
    page = tab.page
    page.goto(base + page_path, wait_until="load")
    page.clock.run_for(WATCH_AFTER_LOAD_MS)
    settle(tab)
    first_view = width_name == "desktop" and mode == "light"
    if first_view:
        result.images = page.evaluate(IMAGES_JS)
        result.links = page.evaluate(LINKS_JS)
        if page_path.startswith(f"{CHINESE}/"):
            result.prose = page.evaluate(PROSE_JS)
        stamp = page.locator(".verified-stamp")
        if stamp.count():
            result.stamp = {
                "text": stamp.first.inner_text(),
                "visible": stamp.first.is_visible(),
                "before_code": page.evaluate(STAMP_BEFORE_CODE_JS),
            }
    if width_name == "phone":
        result.overflow = page.evaluate(OVERFLOW_JS)
    if width_name == "desktop":
        result.contrast = page.evaluate(CONTRAST_JS)
    if audit:
        result.accessibility = audit_accessibility(page, colour)
    if shots is not None and (mode == "light" or width_name == "desktop"):
        name = page_path.removesuffix(".html").replace("/", "--")
        shot = shots / f"{width_name}-{mode}" / f"{name}.jpg"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True, type="jpeg", quality=80)
    # Anything the page still does before it is left is seen too, and so is
    # what it does as it unloads: the tab leaves it for an empty page while
    # this visit still listens.
    page.clock.run_for(WATCH_AFTER_LOAD_MS)
    tab.leaving = True
    page.goto("about:blank")
    return result


# The survey's views (survey_plan.VIEWS: desktop light and dark, phone light)
# at these widths, each from a fresh profile (no stored theme choice, no
# cache). Phone width in dark mode would measure nothing that the other three
# miss.
VIEWPORTS = {"desktop": DESKTOP, "phone": PHONE}
# Browsers that visit pages at once, each in a thread of its own with its own
# Playwright (its API is not thread-safe). A visit spends about a third of its
# time waiting (for the network to go idle, for fonts), so more browsers than
# cores keep the cores busy. (One per core cost 14% less CPU alone, on 80
# pages, but in the suite the survey took 17 minutes instead of 12.)
SURVEY_BROWSERS = 2 * (os.cpu_count() or 1)
# Starting a browser and its three contexts costs about 1.6 s of CPU: a small
# site (a test's one-page copy, 24 views) gets one browser per this many
# views, so that the start does not cost more than the visits.
VIEWS_PER_BROWSER = 50


def survey_share(executable, base, pages, colour, screenshots, all_requests):
    """Visit ``pages`` ({page: its planned views}) with a browser of this
    thread's own; ``colour``: the visits whose audit has the colour rule."""
    from playwright.sync_api import sync_playwright

    visits = {}
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS
        )
        for width_name, mode in survey_plan.VIEWS:
            context = chromium.new_context(
                viewport=VIEWPORTS[width_name], color_scheme=mode
            )
            # Every request of the survey, from pages, workers or frames. (A
            # route would see them too, but it turns the browser's cache off:
            # every page would fetch every asset again.) Other hosts are
            # unknown to the browser (CHROMIUM_ARGS), so nothing leaves.
            context.on("request", lambda request: all_requests.append(request.url))
            tab = Tab(context)
            for page_path, planned in pages.items():
                if (width_name, mode) not in planned:
                    continue
                key = (page_path, (width_name, mode))
                visits[page_path, width_name, mode] = visit(
                    tab,
                    base,
                    page_path,
                    width_name,
                    mode,
                    screenshots,
                    survey_plan.audited(key, colour),
                    key in colour,
                )
            context.close()
        chromium.close()
    return visits


@pytest.fixture(scope="session")
def survey(browser, site, served):
    pages = site_pages(site.html)
    assert pages, "the build wrote no pages"
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    screenshots = None if in_ci() else SCREENSHOTS
    all_requests = []
    read = functools.cache(lambda page: (site.html / page).read_text())
    plan = survey_plan.plan(pages, read)
    colour = survey_plan.colour_sample(plan, read)
    visits_planned = sum(len(planned) for planned in plan.values())
    browsers = min(SURVEY_BROWSERS, -(-visits_planned // VIEWS_PER_BROWSER))
    shares = [
        {page: plan[page] for page in pages[i::browsers]} for i in range(browsers)
    ]
    with concurrent.futures.ThreadPoolExecutor(len(shares)) as pool:
        parts = pool.map(
            lambda share: survey_share(
                find_chromium(), served, share, colour, screenshots, all_requests
            ),
            [share for share in shares if share],
        )
        visits = {key: found for part in parts for key, found in part.items()}
    assert set(visits) == {(p, *view) for p, views in plan.items() for view in views}
    return Survey(
        base=served,
        pages=pages,
        visits=visits,
        html=site.html,
        requests=all_requests,
        colour=colour,
    )


def each(survey, width_name="desktop", mode="light"):
    """The pages visited in this view, with what each showed."""
    for page_path in survey.pages:
        if (page_path, width_name, mode) in survey.visits:
            yield page_path, survey.visits[page_path, width_name, mode]


# -- The tests ------------------------------------------------------------------


def test_every_page_loads_without_console_errors(survey):
    errors = {
        f"{page} ({width}, {mode})": visit.console_errors
        for (page, width, mode), visit in survey.visits.items()
        if visit.console_errors
    }
    assert not errors, f"console errors: {errors}"


def test_every_image_decodes(survey):
    broken = {
        page: [image["src"] for image in visit.images if image["width"] == 0]
        for page, visit in each(survey)
    }
    broken = {page: srcs for page, srcs in broken.items() if srcs}
    assert not broken, f"images that did not decode: {broken}"


def test_requests_stay_on_the_serving_host(survey):
    host = urlsplit(survey.base).netloc
    elsewhere = {
        f"{page} ({width}, {mode})": sorted(
            {
                url
                for url in visit.requests
                if urlsplit(url).scheme not in ("data", "blob", "about")
                and urlsplit(url).netloc != host
            }
        )
        for (page, width, mode), visit in survey.visits.items()
    }
    elsewhere = {page: urls for page, urls in elsewhere.items() if urls}
    assert not elsewhere, f"requests to other hosts: {elsewhere}"
    unattributed = sorted(
        {
            url
            for url in survey.requests
            if urlsplit(url).scheme not in ("data", "blob", "about")
            and urlsplit(url).netloc != host
        }
    )
    assert not unattributed, f"requests to other hosts: {unattributed}"


def test_every_internal_and_download_link_resolves(survey):
    host = urlsplit(survey.base).netloc
    targets = {}  # target url -> a page linking to it
    fragments = {}  # (target url, fragment) -> a page linking to it
    for page, visit in each(survey):
        for href in visit.links["links"]:
            url, fragment = urldefrag(href)
            if urlsplit(url).netloc != host or urlsplit(url).scheme != "http":
                continue
            targets.setdefault(url, page)
            if fragment:
                fragments.setdefault((url, unquote(fragment)), page)
    assert any("/_downloads/" in url for url in targets), "no download links found"
    broken, bodies = [], {}
    for url, page in sorted(targets.items()):
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                body = response.read()
                if not body:
                    broken.append(f"{url} (empty, linked from {page})")
                if response.headers.get_content_type() == "text/html":
                    bodies[url] = body.decode("utf-8", "replace")
        except Exception as error:  # noqa: BLE001 - reported below
            broken.append(f"{url} ({error}, linked from {page})")
    for (url, fragment), page in sorted(fragments.items()):
        body = bodies.get(url)
        if body is not None and not re.search(
            rf"""\b(?:id|name)=["']{re.escape(fragment)}["']""", body
        ):
            broken.append(f"{url}#{fragment} (no such anchor, linked from {page})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_code_blocks_have_copy_buttons(survey):
    tutorials = [p for p in TUTORIALS if p in survey.pages]
    assert tutorials, "no tutorial pages were built"
    lacking = {}
    for page, visit in each(survey):
        blocks = visit.links["codeBlocks"]
        buttons = visit.links["copyButtons"]
        if blocks != buttons or (page in tutorials and blocks == 0):
            lacking[page] = f"{buttons} copy buttons for {blocks} code blocks"
    assert not lacking, f"code blocks without copy buttons: {lacking}"


def test_copy_button_copies_the_code(survey, browser):
    page_path = next(p for p in TUTORIALS if p in survey.pages)
    context = browser.new_context(viewport=DESKTOP)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.goto(survey.base + page_path, wait_until="load")
    block = page.locator("div.highlight-Python div.highlight").first
    expected = block.locator("pre").inner_text().strip()
    block.hover()
    block.locator("button.copybtn").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    context.close()
    assert copied.strip() == expected


def test_search_finds_opcheck(survey, browser):
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(survey.base + "search.html?q=opcheck", wait_until="load")
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for(timeout=30_000)
    hrefs = results.evaluate_all("(links) => links.map((a) => a.href)")
    context.close()
    assert any(f"/{GALLERY_DIR}/" in href for href in hrefs), hrefs


def test_no_page_scrolls_sideways_on_a_phone(survey):
    problems = {}
    for page, visit in each(survey, "phone"):
        overflow = visit.overflow
        if (
            overflow["scrollWidth"] > overflow["width"]
            or overflow["scrolledBy"]
            or overflow["scrollers"]
            or overflow["sticking"]
        ):
            problems[page] = overflow
    assert not problems, "wider than a 390px phone (outside code blocks):\n" + (
        "\n".join(f"{page}: {overflow}" for page, overflow in problems.items())
    )


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_text_is_readable_in_both_modes(survey, mode):
    kinds_seen = set()
    poor = []
    for page, visit in each(survey, "desktop", mode):
        assert visit.contrast["theme"] == mode, f"{page} did not switch to {mode}"
        for text in visit.contrast["texts"]:
            kinds_seen.add(text["kind"])
            needed = MINIMUM_CONTRAST_LARGE if text["large"] else MINIMUM_CONTRAST
            if text["contrast"] < needed:
                poor.append(
                    f"{page}: {text['kind']} {text['text']!r} "
                    f"{text['color']} on {text['background']}: "
                    f"{text['contrast']:.2f} < {needed}"
                )
    assert not poor, f"{len(poor)} pieces of text too faint:\n" + "\n".join(poor[:40])
    assert {"body text", "code", "card", "stamp"} <= kinds_seen, kinds_seen


def test_figures_sit_on_a_light_panel_in_dark_mode(survey):
    figures = [
        (page, figure)
        for page, visit in each(survey, "desktop", "dark")
        for figure in visit.contrast["figures"]
    ]
    assert figures, "no gallery figures found"
    dark = [
        f"{page}: {figure['src']} (backdrop luminance {figure['backdrop']:.2f}, "
        f"panel margin {figure['margin']:.0f}px, filter {figure['filter']})"
        for page, figure in figures
        if figure["backdrop"] < 0.6
        or figure["margin"] < 4
        or re.search(r"invert|brightness\(0?\.[0-8]", figure["filter"])
    ]
    assert not dark, "figures not on a light panel, or dimmed:\n" + "\n".join(dark)


def test_every_tutorial_page_names_the_run_that_verified_it(survey):
    missing_pages = [p for p in TUTORIALS if p not in survey.pages]
    assert not missing_pages, f"tutorial pages not built: {missing_pages}"
    problems = {}
    for page in TUTORIALS:
        name = page.removeprefix(f"{GALLERY_DIR}/").removesuffix(".html")
        # What this build recorded when it ran the page, and what the version
        # matrix recorded: the stamp must show those, whatever is installed.
        record = json.loads((REPO / GALLERY_DIR / f"{name}.verified.json").read_text())
        releases = records.read(REPO, REPO / "advanced" / f"{name}.py").passed
        stamp = survey.visits[page, "desktop", "light"].stamp
        if stamp is None:
            problems[page] = "no verified stamp"
        elif not (stamp["visible"] and stamp["before_code"]):
            problems[page] = f"stamp hidden or below the first code block: {stamp}"
        elif (
            f"PyTorch {record['torch']} on {record['devices'][0]}"
            not in (stamp["text"])
        ):
            problems[page] = f"stamp names another run: {stamp['text']!r}"
        elif not releases or f"PyTorch {', '.join(releases)} (" not in stamp["text"]:
            problems[page] = f"stamp lacks releases {releases}: {stamp['text']!r}"
        elif not re.search(r"\b\d{4}-\d{2}-\d{2}\b", stamp["text"]):
            problems[page] = f"stamp has no date: {stamp['text']!r}"
    assert not problems, problems


class SlowHandler(QuietHandler):
    """Serves a page that fetches a file three seconds after it loads, and
    takes LATE_FILE_SECONDS to answer for that file."""

    def do_GET(self):
        if self.path.endswith("late.txt"):
            time.sleep(LATE_FILE_SECONDS)
            body = b"late"
        else:
            body = (
                b"<!doctype html><title>late</title><script>"
                b"setTimeout(() => fetch('late.txt'), 3000);</script>"
            )
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


LATE_FILE_SECONDS = 1.5


def test_a_visit_waits_for_what_the_page_fetches_late(browser):
    """A visit reads the page only once a request made after the load (a
    timer's, fast-forwarded by the tab's clock) has been answered."""
    server = QuietServer(("127.0.0.1", 0), SlowHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    context = browser.new_context()
    try:
        tab = Tab(context)
        answered = []
        tab.page.on("requestfinished", lambda request: answered.append(request.url))
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        tab.page.goto(url, wait_until="load")
        tab.page.clock.run_for(WATCH_AFTER_LOAD_MS)
        settle(tab)
        read = list(answered)  # what had been answered when the visit read
    finally:
        context.close()
        server.shutdown()
        server.server_close()
    assert url + "late.txt" in read, f"read before late.txt came: {read}"


def test_site_has_a_favicon(site):
    html = (site.html / "index.html").read_text()
    icons = re.findall(r'<link rel="icon" href="([^"]+)"', html)
    assert icons and icons[0].endswith(".svg"), icons
    assert (site.html / icons[0]).is_file()


def test_no_serious_accessibility_violations_in_either_mode(survey):
    audited = {
        (p, (w, m)): v for (p, w, m), v in survey.visits.items() if v.accessibility
    }
    serious = [
        f"{page} ({mode}): {violation['id']} ({violation['impact']}) x"
        f"{violation['count']}: {violation['help']} {violation['targets']}"
        for (page, (_, mode)), visit in audited.items()
        for violation in visit.accessibility["violations"]
        if violation["impact"] in ("serious", "critical")
    ]
    # axe audited every page in the first view and the sample in dark mode,
    # and nothing else (survey_plan.audited), each time with its whole set of
    # rules.
    first = {(p, (w, m)) for p, w, m in survey.visits if (w, m) == survey_plan.FIRST}
    dark = {key for key in survey.colour if key[1] == survey_plan.DARK}
    assert first and dark and set(audited) == first | dark
    assert all("html-has-lang" in v.accessibility["rules"] for v in audited.values())
    # Each rule that judges colours ran in each mode, on the planned sample and
    # nowhere else (axe runs it unless told not to: a sample ignored would
    # cost the survey its saving, a rule turned off everywhere would hide
    # every contrast).
    assert {mode for _, (_, mode) in survey.colour} == {"light", "dark"}
    for rule in survey_plan.COLOUR_RULES:
        ran = {key for key, v in audited.items() if rule in v.accessibility["rules"]}
        assert ran == survey.colour, f"{rule} ran elsewhere than on the sample"
    assert not serious, "\n".join(serious[:40])


# A selector that picks out a language: [lang], [lang=...], [lang|=...] and the
# like, or :lang(...).
LANGUAGE_SELECTOR = re.compile(r"\[\s*(?:xml:)?lang\b|:lang\(", re.I)


def test_no_stylesheet_styles_one_language_apart(site):
    """One colour sample serves both editions (survey_plan) because a shape
    looks the same in either: no stylesheet the site ships, nor a page's own
    style, selects by language."""
    styles = {
        path.relative_to(site.html).as_posix(): path.read_text(errors="replace")
        for path in site.html.rglob("*.css")
    }
    for page in site_pages(site.html):
        html = (site.html / page).read_text()
        for i, text in enumerate(re.findall(r"<style[^>]*>(.*?)</style>", html, re.S)):
            styles[f"{page}, <style> {i + 1}"] = text
    assert any("pydata" in name for name in styles), sorted(styles)[:10]
    apart = sorted(n for n, text in styles.items() if LANGUAGE_SELECTOR.search(text))
    assert not apart, f"stylesheets that style a language apart: {apart}"


def test_every_page_links_to_itself_in_the_other_edition(survey):
    problems = []
    for page, visit in each(survey):
        chinese = page.startswith(f"{CHINESE}/")
        counterpart = (
            page.removeprefix(f"{CHINESE}/") if chinese else f"{CHINESE}/{page}"
        )
        expected = survey.base + counterpart
        # The theme renders the switcher twice: in the header, and in the
        # drawer that replaces the header on a phone. Both must point there.
        links = [link["href"] for link in visit.links["editions"]]
        alternates = {link["lang"]: link["href"] for link in visit.links["alternates"]}
        if not links or set(links) != {expected}:
            problems.append(f"{page}: switcher links {links}, expected {expected}")
        if alternates.get("zh-Hans" if not chinese else "en") != expected:
            problems.append(f"{page}: hreflang alternates {alternates}")
        if counterpart not in survey.pages:
            problems.append(f"{page}: no page {counterpart} in the other edition")
    assert not problems, "\n".join(problems[:40])


def test_chinese_pages_have_no_english_prose(survey):
    """A Chinese reader meets English only in code, output and names.

    Every Chinese page, the gallery index and the search page included, is
    read as the browser shows it (text, tooltips, labels, placeholders and alt
    text); three or more English words in a row outside code blocks, inline
    code and printed output are English prose the catalogs, the theme's
    strings (locale/zh_CN/LC_MESSAGES/sphinx.po) or our extensions' strings
    (_ext/locale/zh_CN/LC_MESSAGES/site.po) left untranslated.
    """
    chinese = [page for page in survey.pages if page.startswith(f"{CHINESE}/")]
    assert f"{CHINESE}/{GALLERY_DIR}/index.html" in chinese, chinese
    offenders = {}
    for page in chinese:
        found = english_prose(survey.visits[page, "desktop", "light"].prose)
        if found:
            offenders[page] = found
    report = "\n".join(
        f"{page}: "
        + " | ".join(phrase[:80] for phrase in phrases[:8])
        + (f" (and {len(phrases) - 8} more)" if len(phrases) > 8 else "")
        for page, phrases in offenders.items()
    )
    assert not offenders, f"English prose on Chinese pages:\n{report}"


# Runs in the page: the links Sphinx-Gallery and _ext/api_reference.py put
# in the code, and where each leads.
CODE_LINKS_JS = """() => [...document.querySelectorAll(
    "div.highlight a[class*='sphx-glr-backref-module-']")].map(
    (a) => ({href: a.href, name: a.title}))"""
# Runs in the page a code link opened: the element its fragment names.
TARGET_JS = """() => {
    const id = decodeURIComponent(location.hash.slice(1));
    const el = id ? document.getElementById(id) : null;
    return el && {text: el.textContent, visible: el.getClientRects().length > 0};
}"""


@pytest.mark.parametrize("edition", ["", f"{CHINESE}/"])
def test_code_links_land_on_the_api_entry_they_name(survey, browser, edition):
    """A reader clicking each torch name in a tutorial's code lands on its
    entry in the same edition's API reference, at an anchor that exists."""
    page_path = f"{edition}{GALLERY_DIR}/python_custom_ops.html"
    assert page_path in survey.pages
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(survey.base + page_path, wait_until="load")
    links = {link["href"]: link["name"] for link in page.evaluate(CODE_LINKS_JS)}
    names = set(links.values())
    assert {"torch.library.custom_op", "torch.library.opcheck"} <= names, names
    landed_wrong = []
    for href, name in sorted(links.items()):
        expected = f"{survey.base}{edition}api/{name}.html#"
        if href not in (expected + name, expected + "module-" + name):
            landed_wrong.append(f"{name}: {href} (expected {expected})")
            continue
        page.goto(href, wait_until="load")
        target = page.evaluate(TARGET_JS)
        if (
            not target
            or not target["visible"]
            or name.split(".")[-1] not in target["text"]
        ):
            landed_wrong.append(f"{name}: {href} shows {target}")
    context.close()
    assert not landed_wrong, "\n".join(landed_wrong)


def test_chinese_search_finds_the_pages_about_custom_operators(survey, browser):
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(survey.base + f"{CHINESE}/search.html?q=自定义算子", wait_until="load")
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for(timeout=30_000)
    hrefs = results.evaluate_all("(links) => links.map((a) => a.href)")
    context.close()
    assert not errors, errors
    assert any(f"/{CHINESE}/{GALLERY_DIR}/" in href for href in hrefs), hrefs
