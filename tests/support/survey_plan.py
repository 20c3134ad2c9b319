"""Which views of each page the browser survey (``test_browser.py``) visits.

A visit costs about a second of a core: the survey is the largest part of CI.
Every page is visited at desktop width in light mode, the view in which the
survey collects the most (console errors, images, links, requests, prose,
contrast and axe). Pages of the site's own writing are visited in all three
views. The API reference's entry pages (``api/``, 65 per edition) are one
template around an autodoc docstring, so for them the other two views are
planned:

* dark mode: a sample of each edition's entries that together hold every
  element shape (a tag with its classes) any entry of that edition holds.
  Contrast in dark mode follows from the theme's rules for those shapes,
  which the sample exercises all of;
* phone width: every English entry, since what overflows a phone is a long
  name or line in one docstring, not a shape; a translated entry only when
  it is in its edition's dark sample or its docstring block differs from
  its English twin's (the docstrings are English in both editions, so the
  twins' blocks are normally the same bytes).

axe-core audits every page in the first view. Its two rules that judge
colours (``COLOUR_RULES``), most of the audit's cost (a tutorial's
highlighted code is thousands of text nodes, and its code links are links in
a block of text), run in each desktop view on a sample of the site's pages
that together hold every element shape the pages planned for that view
hold: the same reasoning as the dark sample, for light mode as well and for
every kind of page. One sample serves both editions: they share the theme
and its stylesheets, which style no language apart (``test_browser`` checks
that no stylesheet selects by language), so a shape looks the same in
either. In dark mode axe audits the sample alone: a dark page is its light
twin's document under other colours, and the light view audited every
page's document with the rules that judge structure (names, roles, labels);
what dark mode shows or hides is a shape's, and the sample holds every
shape. The survey's own contrast check (every distinct look of text on
every desktop view) still reads every page.
"""

import functools
import re
from html.parser import HTMLParser

from pagelib import api_names, layout

FIRST = ("desktop", "light")
DARK = ("desktop", "dark")
PHONE = ("phone", "light")
VIEWS = (FIRST, DARK, PHONE)
# axe's rules whose verdict is a colour's: ``color-contrast`` (text against
# what lies behind it) and ``link-in-text-block`` (a link told from the text
# around it by colour alone needs 3:1 against it). On one tutorial they cost
# 1.4 and 0.65 s, the other 50-odd rules together 0.4 s.
COLOUR_RULES = ("color-contrast", "link-in-text-block")
DOCSTRING = re.compile(
    r'<div class="api-docstring[^"]*"[^>]*>.*?<p class="rubric">', re.S
)


class _Shapes(HTMLParser):
    def __init__(self):
        super().__init__()
        self.shapes = set()

    def handle_starttag(self, tag, attrs):
        classes = sorted((dict(attrs).get("class") or "").split())
        self.shapes.add(".".join([tag, *classes]))


@functools.cache
def shapes(html):
    """Every element shape of a page: its tag and its classes, sorted (once per
    page: ``plan`` and ``colour_sample`` both ask for an entry's)."""
    parser = _Shapes()
    parser.feed(html)
    return frozenset(parser.shapes)


def covering_sample(page_shapes):
    """Pages whose shapes together are every shape of ``page_shapes``
    ({page: shapes}), chosen greedily: the page adding the most new shapes
    first, ties broken by name, so the sample is the same on every run."""
    left = set().union(*page_shapes.values()) if page_shapes else set()
    sample = []
    while left:
        best = max(sorted(page_shapes), key=lambda p: len(page_shapes[p] & left))
        sample.append(best)
        left -= page_shapes[best]
    return sample


def edition_of(page):
    """The translation's language a page path belongs to, or None."""
    first = page.split("/", 1)[0]
    return first if first in layout.TRANSLATIONS else None


def is_entry(page):
    rest = page.split("/", 1)[1] if edition_of(page) else page
    return rest.startswith(api_names.FOLDER + "/")


TOOLTIP = re.compile(r' title="[^"]*"')


def docstring_block(html):
    """An entry's signature and docstring as shown, less tooltips (Sphinx
    translates the "link to this definition" one)."""
    found = DOCSTRING.search(html)
    return TOOLTIP.sub("", found.group(0) if found else html)


def plan(pages, read):
    """{page: the views to visit} for page paths relative to the HTML root;
    ``read(page)`` gives a page's HTML."""
    views = {page: list(VIEWS) for page in pages if not is_entry(page)}
    entries = [page for page in pages if is_entry(page)]
    texts = {page: read(page) for page in entries}
    by_edition = {}
    for page in entries:
        by_edition.setdefault(edition_of(page), {})[page] = shapes(texts[page])
    dark = set()
    for page_shapes in by_edition.values():
        dark.update(covering_sample(page_shapes))
    for page in entries:
        language = edition_of(page)
        twin = page.removeprefix(f"{language}/") if language else page
        phone = (
            language is None
            or page in dark
            or twin not in texts
            or docstring_block(texts[page]) != docstring_block(texts[twin])
        )
        views[page] = [FIRST] + [DARK] * (page in dark) + [PHONE] * phone
    return views


def colour_sample(views, read):
    """The visits ({(page, view)}) in which axe's ``COLOUR_RULES`` run,
    for ``views`` as ``plan`` gives them: in each desktop view, a covering
    sample of the pages planned for it, both editions together."""
    sample = set()
    for view in (FIRST, DARK):
        planned = {page: shapes(read(page)) for page, v in views.items() if view in v}
        sample.update((page, view) for page in covering_sample(planned))
    return sample


def audited(visit, colour):
    """Whether axe audits ``visit`` ((page, view)), for ``colour`` as
    ``colour_sample`` gives it: every page in the first view, the sample in
    dark mode, nothing at phone width."""
    return visit[1] == FIRST or visit in colour
