"""Two editions from one run: English at the root, 简体中文 under ``zh_CN/``.

``make html`` runs the examples once, in the English build, and then builds
the Chinese edition from the same tree with ``-D language=zh_CN -D
plot_gallery=0``: the prose comes from the gettext catalogs in ``locale/``,
the code, printed output and figures are those of the English run
(``pagelib/layout.py`` lists the editions). Four extensions do what that
takes beyond Sphinx's own translation. This one:

* links every page to the same page in the other edition (the navbar's
  "English | 简体中文" and ``<link rel="alternate" hreflang>``), with
  relative links that work from ``file://``;
* where the site is published (``html_baseurl``, from ``SITE_URL``: the
  English edition's address), makes a translated edition's address its folder
  under it, so that its pages name themselves as canonical and its notebooks
  link to its own pages;
* makes Chinese search work: Sphinx 9.0.4's Chinese ``language_data.js``
  names a ``ChineseStemmer`` that does not exist (sphinx issue 14229, fixed in
  9.1), and the browser never splits a Chinese query into words;
  ``SearchChinese`` below fixes both.

The others: ``site_catalog`` (our extensions' own strings, from
``_ext/locale/<language>/LC_MESSAGES/site.po``, and the site's name),
``translated_gallery`` (what Sphinx-Gallery writes outside gettext's reach:
thumbnails, figures' alt text, running and computation times, and the line
saying where a translated page's output comes from) and
``translated_downloads`` (the ``.py`` and ``.ipynb`` downloads of a
translated page).
"""

import logging
import posixpath

from sphinx.locale import get_translation

from pagelib import layout
from pagelib.layout import EDITIONS

_ = get_translation(layout.SITE_CATALOG)


def language_of(app):
    return app.config.language or layout.SOURCE_LANGUAGE


# -- Chinese search -----------------------------------------------------------

# Splits a query the way the index was split: runs of Han characters are cut
# into the longest words the search index knows (forward maximum matching),
# everything else at non-word characters as Sphinx does by default.
SPLIT_QUERY_JS = r"""
var splitQuery = (query) => {
  const index = (typeof Search !== "undefined" && Search._index) || {};
  const known = (word) =>
    (index.terms && word in index.terms) ||
    (index.titleterms && word in index.titleterms);
  const words = [];
  for (const part of query.split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu)) {
    for (const run of part.match(/\p{Script=Han}+|[^\p{Script=Han}]+/gu) || []) {
      if (!/\p{Script=Han}/u.test(run)) {
        words.push(run);
        continue;
      }
      let start = 0;
      while (start < run.length) {
        let end = Math.min(run.length, start + 8);
        while (end > start + 1 && !known(run.slice(start, end))) end--;
        const word = run.slice(start, end);
        if (word.length > 1 || known(word)) words.push(word);
        start = end;
      }
    }
  }
  return words;
};
"""


def chinese_search():
    """Chinese search whose JavaScript side works with Sphinx 9.0.4.

    Made only for a Chinese build: importing Sphinx's Chinese search imports
    jieba, a third of a second every English build would pay for nothing.
    """
    from sphinx.search.zh import SearchChinese

    class SearchChineseFixed(SearchChinese):
        """Chinese search whose JavaScript side works with Sphinx 9.0.4."""

        def __init__(self, options):
            import jieba

            jieba.setLogLevel(logging.WARNING)  # its dictionary's loading is no news
            # Sphinx loads jieba's own dictionary again as a "user dictionary"
            # (3 s, on every build, even one that indexes nothing); jieba loads
            # that same dictionary by itself, from a cache, the first time it cuts
            # a sentence.
            super().__init__({"dict": "", **options})

        # Latin words are stemmed with the English stemmer; Sphinx 9.0.4 derives
        # the stemmer's JavaScript class name from language_name, so it must name
        # the class english-stemmer.js defines.
        language_name = "English"
        js_splitter_code = SPLIT_QUERY_JS

    return SearchChineseFixed


# -- Links between the editions -----------------------------------------------


def edition_links(app, pagename):
    """[(name, relative href, hreflang, is current)] for one page."""
    here = EDITIONS[language_of(app)][1] + pagename + ".html"
    links = []
    for language, (name, folder, tag) in EDITIONS.items():
        target = folder + pagename + ".html"
        href = posixpath.relpath(target, posixpath.dirname(here) or ".")
        links.append((name, href, tag, language == language_of(app)))
    return links


def add_edition_links(app, pagename, templatename, context, doctree):
    if language_of(app) not in EDITIONS:
        return
    links = edition_links(app, pagename)
    context["edition_links"] = links
    context["edition_label"] = _("Language")
    alternates = "".join(
        f'<link rel="alternate" hreflang="{tag}" href="{href}" />\n'
        for _, href, tag, _ in links
    )
    context["metatags"] = context.get("metatags", "") + alternates


def edition_baseurl(app, config):
    """The published address of this build's edition: ``html_baseurl`` (the
    site's, where English lives) with the edition's folder added."""
    folder = EDITIONS.get(language_of(app), ("", "", ""))[1]
    base = config.html_baseurl
    if not base or not folder or base.rstrip("/").endswith("/" + folder.rstrip("/")):
        return
    config.html_baseurl = base.rstrip("/") + "/" + folder


def setup(app):
    if (app.config.language or "").startswith("zh"):
        app.add_search_language(chinese_search())
    app.connect("config-inited", edition_baseurl)
    app.connect("html-page-context", add_edition_links)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
