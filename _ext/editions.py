"""Two editions from one run: English at the root, 简体中文 under ``zh_CN/``.

``make html`` runs the examples once, in the English build, and then builds
the Chinese edition from the same tree with ``-D language=zh_CN -D
plot_gallery=0``: the prose comes from the gettext catalogs in ``locale/``,
the code, printed output and figures are those of the English run. This
extension does what that takes beyond Sphinx's own translation:

* every page links to the same page in the other edition (the navbar's
  "English | 简体中文" and ``<link rel="alternate" hreflang>``), with
  relative links that work from ``file://``;
* where the site is published (``html_baseurl``, from ``SITE_URL``: the
  English edition's address), a translated edition's address is its folder
  under it, so that its pages name themselves as canonical and its notebooks
  link to its own pages;
* our extensions' own strings (the stamp, the card footers, the floor) come
  from the catalog ``_ext/locale/<language>/LC_MESSAGES/site.po``;
* each translated page says in one line where its code and output come from;
* the ``.py`` and ``.ipynb`` downloads of a translated page carry the
  translated prose around code identical to the English script's
  (the ``translated_downloads`` extension);
* Chinese search works: Sphinx 9.0.4's Chinese ``language_data.js`` names a
  ``ChineseStemmer`` that does not exist (sphinx issue 14229, fixed in 9.1),
  and the browser never splits a Chinese query into words; ``SearchChinese``
  below fixes both.
"""

import ast
import html
import logging
import posixpath
import re

from docutils import nodes
from sphinx.locale import get_translation
from sphinx.util import logging as sphinx_logging

from pagelib import gallery, layout, translation, wording
from pagelib.layout import EDITIONS

logger = sphinx_logging.getLogger(__name__)
_ = get_translation(layout.SITE_CATALOG)


def language_of(app):
    return app.config.language or layout.SOURCE_LANGUAGE


def is_translation(app):
    return layout.is_translation(app.config.language)


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


# -- What a translated page says about itself --------------------------------


def note_translated_output(app, doctree):
    """Under the stamp of a translated tutorial: where its output comes from."""
    if not is_translation(app):
        return
    for stamp in doctree.findall(nodes.container):
        if "verified-stamp" in stamp["classes"]:
            stamp += nodes.paragraph(
                text=_(
                    "This page is a translation: its code, printed output and "
                    "figures are those of the verified English run."
                ),
                classes=["translation-note"],
            )
            break


RUNNING_TIME = re.compile(
    r"^Total running time of the script: \((\d+) minutes ([\d.]+) seconds\)$"
)


def translate_running_time(app, doctree):
    """Sphinx-Gallery's per-run "Total running time" line, in the page's language.

    Its text changes with every run, so it is kept out of the catalogs.
    """
    if not is_translation(app):
        return
    for paragraph in list(doctree.findall(nodes.paragraph)):
        match = RUNNING_TIME.match(paragraph.astext())
        if not match:
            continue
        label = str(_("Total running time of the script:"))
        time = _("({minutes} minutes {seconds} seconds)").format(
            minutes=match.group(1), seconds=match.group(2)
        )
        # No space after a label that ends in full-width punctuation, as in
        # the stamp.
        text = wording.join_sentences([label, time])
        replacement = nodes.paragraph(classes=paragraph["classes"])
        replacement += nodes.strong(text=label)
        replacement += nodes.Text(text[len(label) :])
        paragraph.replace_self(replacement)


# -- The gallery index and the figures, in the page's language ------------------

THUMB_TOOLTIP = re.compile(
    r'(<div class="sphx-glr-thumbcontainer"[^>]*? tooltip=")([^"]*)(")'
)
THUMB_TITLE = re.compile(r'(<div class="sphx-glr-thumbnail-title">)(.*?)(</div>)', re.S)


# Chinese sets no space beside full-width punctuation, nor between two Han
# characters; a space stays between Han and Latin text (locale/GLOSSARY.md).
_HAN = re.compile(r"[\u3400-\u9fff]")
_FULL_WIDTH = re.compile(r"[\u3000-\u303f\uff00-\uffef]")
_EMPHASIS = re.compile(r"([ \n]?)(\*\*?)([^*\s](?:[^*]*[^*\s])?)\2([ \n]?)")


def _no_gap(left, right):
    if _FULL_WIDTH.match(left) or _FULL_WIDTH.match(right):
        return True
    return bool(_HAN.match(left) and _HAN.match(right))


def _emphasis_without_gaps(match):
    """``即 *分发器* 中`` -> ``即*分发器*中``, and ``*custom_op* 内部`` kept."""
    text = match.string
    before = text[match.start() - 1] if match.start() else ""
    after = text[match.end() : match.end() + 1]
    lead, mark, inner, trail = match.groups()
    if lead and _no_gap(before, inner[0]):
        lead = ""
    if trail and _no_gap(inner[-1], after):
        trail = ""
    return lead + mark + inner + mark + trail


def intro_and_title(script_text, name):
    """(summary, title) of a script as Sphinx-Gallery shows them on its
    thumbnail: the docstring's first paragraph and title, markup removed."""
    from sphinx_gallery.gen_rst import extract_intro_and_title

    docstring = ast.get_docstring(ast.parse(script_text)) or ""
    # The glossary's spaces around ``*emphasis*`` next to Chinese text are
    # only there for the reST; without the asterisks they are bare gaps.
    docstring = _EMPHASIS.sub(_emphasis_without_gaps, docstring)
    return extract_intro_and_title(name, docstring)


def _leftover_markup(text):
    """Markup Sphinx-Gallery's clean-up leaves: it strips roles and literals
    only where a space stands before them, as in English; in Chinese they
    touch the characters around them (``、``, ``：``, the ``\\ `` escape)."""
    text = re.sub(r"\\ ", "", text)
    text = re.sub(r":(?:[^:\s`]+:)+`([^`<>]+?)\s*<[^>`]+>`", r"\1", text)
    text = re.sub(r":(?:[^:\s`]+:)+`~?([^`]+)`", r"\1", text)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`<>]+) <[^`<>]+>`__?", r"\1", text)
    return re.sub(r"`([^`]+)`", r"\1", text)


def thumbnail_translations(app, docnames):
    """{English text: translation} of the titles and summaries Sphinx-Gallery
    writes on the thumbnails of these example pages, from their catalogs."""
    language = language_of(app)
    examples = gallery.examples(app.config.sphinx_gallery_conf, app.srcdir)
    found = {}
    for docname in docnames:
        source, _folder = examples[docname]
        app.env.note_dependency(str(layout.catalog_path(app.srcdir, language, docname)))
        messages = translation.catalog(app.srcdir, language, docname)
        if not messages:
            continue
        english = source.read_text(encoding="utf-8")
        # The translated download, written before the build reads anything
        # (translated_downloads), holds exactly this translation.
        written = layout.translated_downloads(app.srcdir, language) / source.name
        if written.is_file():
            translated = written.read_text(encoding="utf-8")
        else:
            translated, _missing = translation.translate_script(english, messages)
        for before, after in zip(
            intro_and_title(english, source.name),
            intro_and_title(translated, source.name),
            strict=True,
        ):
            after = _leftover_markup(after)
            if after != before:
                found[before] = after
    return found


def translate_gallery_index(app, doctree):
    """The thumbnails of a gallery's index, titled and summarised in the
    page's language.

    Sphinx-Gallery writes each thumbnail's title and hover summary as raw
    HTML, which gettext never sees; they are taken here from the translated
    title and first paragraph of each page's own catalog.
    """
    if not is_translation(app):
        return
    conf = app.config.sphinx_gallery_conf
    galleries = {
        (gallery_dir / "index").relative_to(app.srcdir).as_posix(): gallery_dir
        for _examples, gallery_dir in gallery.galleries(conf, app.srcdir)
    }
    if app.env.docname not in galleries:
        return
    folder = galleries[app.env.docname]
    docnames = [
        docname
        for docname, (_source, page_folder) in gallery.examples(
            conf, app.srcdir
        ).items()
        if page_folder == folder
    ]
    found = thumbnail_translations(app, docnames)

    def swap(match):
        english = html.unescape(match.group(2))
        text = found.get(english)
        if text is None:
            return match.group(0)
        return match.group(1) + html.escape(text) + match.group(3)

    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext()
        if "sphx-glr-thumb" not in text:
            continue
        new = THUMB_TITLE.sub(swap, THUMB_TOOLTIP.sub(swap, text))
        if new != text:
            raw.replace_self(nodes.raw("", new, format=raw.get("format", "html")))


def translate_figure_alt(app, doctree):
    """Figures' alternative text in the page's language.

    Sphinx-Gallery takes a figure's alt text from its (English) title. A
    translation in the page's catalog is used where there is one;
    otherwise the figure is named by its number and the (translated) heading
    of the section it illustrates.
    """
    if not is_translation(app):
        return
    from sphinx_gallery.directives import imgsgnode

    messages = translation.catalog(app.srcdir, language_of(app), app.env.docname)
    number = 0
    for node in list(
        doctree.findall(lambda n: isinstance(n, (nodes.image, imgsgnode)))
    ):
        alt = node.get("alt")
        if not alt:
            continue  # decorative: nothing to say
        number += 1
        text = messages.get(alt)
        if not text:
            section = next(
                (a for a in _ancestors(node) if isinstance(a, nodes.section)), None
            )
            heading = (
                section[0].astext()
                if section is not None and isinstance(section[0], nodes.title)
                else ""
            )
            text = (
                _("Figure {number}: {section}").format(number=number, section=heading)
                if heading
                else _("Figure {number}").format(number=number)
            )
        # Sphinx-Gallery writes the alt text into its HTML unescaped.
        node["alt"] = str(text).replace('"', "”")


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


# Sphinx-Gallery's words on its "Computation times" pages.
EXECUTION_TIMES_WORDS = {
    "Computation times": _("Computation times"),
    "Example": _("Example"),
    "Time": _("Time"),
    "Mem (MB)": _("Mem (MB)"),
}
EXECUTION_TIMES = re.compile(
    r"^(?P<time>\S+) total execution time for (?P<count>\d+) files "
    r"from (?P<where>.+):$"
)


def translate_execution_times(app, doctree):
    """Sphinx-Gallery's "Computation times" pages, in the page's language."""
    if not is_translation(app) or not app.env.docname.endswith("sg_execution_times"):
        return
    for node in list(doctree.findall(nodes.Text)):
        if node.astext() in EXECUTION_TIMES_WORDS:
            words = str(EXECUTION_TIMES_WORDS[node.astext()])
            node.parent.replace(node, nodes.Text(words))
    for paragraph in list(doctree.findall(nodes.paragraph)):
        match = EXECUTION_TIMES.match(paragraph.astext())
        if not match:
            continue
        where = match["where"]
        where = str(_("all galleries")) if where == "all galleries" else where
        replacement = nodes.paragraph(classes=paragraph["classes"])
        replacement += nodes.Text(
            _("Total execution time of {count} files from {where}: ").format(
                count=match["count"], where=where
            )
        )
        replacement += nodes.strong(text=match["time"])
        paragraph.replace_self(replacement)


# conf.py's names of the site (html_title) and of its authors, in the
# edition's language: a name conf.py changes is shown as it is until it is
# added here and translated.
SITE_NAMES = {
    "PyTorch Custom Operators": _("PyTorch Custom Operators"),
    "The custom operators tutorial authors": _("The custom operators tutorial authors"),
}


def register_catalog(app, config):
    """Compile our strings' catalogs if needed, hand them to Sphinx, and name
    the site in the edition's language."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    for po in layout.EXTENSION_LOCALE.glob(f"*/LC_MESSAGES/{layout.SITE_CATALOG}.po"):
        mo = po.with_suffix(".mo")
        if not mo.is_file() or mo.stat().st_mtime < po.stat().st_mtime:
            with po.open("rb") as source:
                catalog = read_po(source)
            with mo.open("wb") as target:
                write_mo(target, catalog)
    app.add_message_catalog(layout.SITE_CATALOG, str(layout.EXTENSION_LOCALE))
    if not is_translation(app):
        return
    if config.html_title in SITE_NAMES:
        config.html_title = str(SITE_NAMES[config.html_title])
    # The theme's search box shows a theme option, not a message.
    options = dict(config.html_theme_options)
    options["search_bar_text"] = str(_("Search the docs ..."))
    config.html_theme_options = options
    # The footer's "© Copyright 2026, The ... authors." names the authors in
    # the page's language; the sentence around it is in locale/*/sphinx.po.
    year, _comma, author = config.copyright.partition(", ")
    if author == config.author and author in SITE_NAMES:
        config.copyright = _("{year}, {author}").format(
            year=year, author=SITE_NAMES[author]
        )


def setup(app):
    if (app.config.language or "").startswith("zh"):
        app.add_search_language(chinese_search())
    app.connect("config-inited", register_catalog)
    app.connect("config-inited", edition_baseurl)
    app.connect("html-page-context", add_edition_links)
    app.connect("doctree-read", note_translated_output, priority=600)
    app.connect("doctree-read", translate_running_time)
    app.connect("doctree-read", translate_gallery_index)
    app.connect("doctree-read", translate_figure_alt)
    # Before Sphinx records the page's title (priority 500), which the
    # <title> and the breadcrumb show.
    app.connect("doctree-read", translate_execution_times, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
