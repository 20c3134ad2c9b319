"""Keep every page self-contained: nothing is fetched from another host.

Reading the site must not tell a third party who reads what, and must work
without a network. Two things take care of that:

* Sphinx-Gallery's "Computation times" pages (``sg_execution_times``) load
  jQuery, DataTables and Bootstrap from CDNs to make their table sortable.
  ``source-read`` drops that raw HTML block, leaving a plain table, which the
  generator already sorts by time.
* ``html-page-context`` looks at what each page is about to load (its
  scripts, stylesheets and the resources its body refers to) and warns, so
  that ``-W`` fails the build, about anything that is not served with the
  site: a CDN script an extension adds, MathJax on a page with math, an
  image hot-linked from elsewhere.
"""

import re

from sphinx.util import logging

logger = logging.getLogger(__name__)

# The raw HTML block Sphinx-Gallery writes into sg_execution_times.rst: the
# directive line and its indented body, up to the next line indented less.
CDN_BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)\.\. raw:: html\n(?:(?P=indent)[ \t]+.*\n|[ \t]*\n)*",
    re.M,
)
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)
# Elements in a page's body that make the browser fetch something at once,
# and the attributes that name what.
FETCHING_TAG = re.compile(
    r"<(script|img|iframe|audio|video|source|embed|input|link)\b[^>]*>", re.I
)
FETCHING_ATTRIBUTE = re.compile(r"\s(src|srcset|data|href)=[\"']([^\"']+)[\"']", re.I)


def drop_cdn_tables(app, docname, source):
    if not docname.endswith("sg_execution_times"):
        return

    def replace(match):
        block = match.group(0)
        return "" if re.search(r"https?://", block) else block

    source[0] = CDN_BLOCK.sub(replace, source[0])


def _urls(context):
    for asset in list(context.get("script_files", [])) + list(
        context.get("css_files", [])
    ):
        yield str(getattr(asset, "filename", asset))
    for tag in FETCHING_TAG.finditer(context.get("body", "") or ""):
        for attribute in FETCHING_ATTRIBUTE.finditer(tag.group(0)):
            name, value = attribute.group(1).lower(), attribute.group(2)
            if (name == "href") != (tag.group(1).lower() == "link"):
                continue
            # srcset lists "url width" pairs separated by commas.
            for candidate in value.split(",") if name == "srcset" else [value]:
                if candidate.strip():
                    yield candidate.strip().split()[0]


def check_page(app, pagename, templatename, context, doctree):
    remote = sorted({url for url in _urls(context) if REMOTE.match(url)})
    for url in remote:
        logger.warning(
            "page loads %s from another host; serve it with the site instead",
            url,
            location=pagename,
            type="offline_pages",
        )


def setup(app):
    app.connect("source-read", drop_cdn_tables)
    # Late, so that assets other extensions add to the page are seen too.
    app.connect("html-page-context", check_page, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
