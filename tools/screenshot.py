"""The README's picture of a page, taken from the last ``make html``.

``make screenshot`` serves ``_build/html`` on 127.0.0.1, opens ``PAGE`` in
Chromium (its headless shell where both are installed, as the browser tests
do) through Playwright, takes the top of the page in light mode at
``VIEWPORT``, and writes ``IMAGE``, compressed losslessly with optipng when it
is installed. The image is committed; take it again when the page's look
changes.
"""

import functools
import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HTML = REPO / "_build" / "html"
PAGE = "tutorials/python_custom_ops.html"
IMAGE = REPO / "docs" / "images" / "tutorial-page.png"
VIEWPORT = {"width": 1000, "height": 720}
CHROMIUMS = ["chromium-headless-shell", "chromium"]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def chromium():
    for name in CHROMIUMS:
        found = shutil.which(name) or shutil.which(name, path="/usr/bin")
        if found:
            return found
    sys.exit(f"no Chromium: install one of {', '.join(CHROMIUMS)}")


def main():
    if not (HTML / PAGE).is_file():
        sys.exit(f"no {HTML.relative_to(REPO) / PAGE}: run `make html` first")
    from playwright.sync_api import sync_playwright

    handler = functools.partial(QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    IMAGE.parent.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"]
            )
            context = browser.new_context(viewport=VIEWPORT, color_scheme="light")
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/{PAGE}")
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(IMAGE))
            browser.close()
    finally:
        server.shutdown()
    if shutil.which("optipng"):
        subprocess.run(["optipng", "-quiet", "-o5", str(IMAGE)], check=True)
    print(f"wrote {IMAGE.relative_to(REPO)} ({IMAGE.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
