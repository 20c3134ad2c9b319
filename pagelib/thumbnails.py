"""The thumbnails Sphinx-Gallery writes (a page's card: its title and, on
hover, its summary), in a translated edition's language.

Sphinx-Gallery writes them as raw HTML, which gettext never sees; the
translations come from each page's own catalog. The gallery's index
(``translated_gallery``) shows such cards, and the API reference's
mini-galleries (``api_reference``) copy theirs from it.
"""

import ast
import html
import re

from docutils import nodes

from pagelib import gallery, layout, translation

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


def leftover_markup(text):
    """Markup Sphinx-Gallery's clean-up leaves: it strips roles and literals
    only where a space stands before them, as in English; in Chinese they
    touch the characters around them (``、``, ``：``, the ``\\ `` escape)."""
    text = re.sub(r"\\ ", "", text)
    text = re.sub(r":(?:[^:\s`]+:)+`([^`<>]+?)\s*<[^>`]+>`", r"\1", text)
    text = re.sub(r":(?:[^:\s`]+:)+`~?([^`]+)`", r"\1", text)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`<>]+) <[^`<>]+>`__?", r"\1", text)
    return re.sub(r"`([^`]+)`", r"\1", text)


def translations(app, docnames):
    """{English text: translation} of the titles and summaries Sphinx-Gallery
    writes on the thumbnails of these example pages, from their catalogs."""
    language = app.config.language
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
            after = leftover_markup(after)
            if after != before:
                found[before] = after
    return found


def translate(doctree, found):
    """Swap each thumbnail's title and summary in ``doctree`` for its
    translation in ``found`` ({English: translation}); others stay."""

    def swap(match):
        text = found.get(html.unescape(match.group(2)))
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
