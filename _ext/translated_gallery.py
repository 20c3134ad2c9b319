"""What Sphinx-Gallery writes outside gettext's reach, in a translated
edition's language (see ``editions`` for the editions).

Sphinx-Gallery writes the thumbnails of a gallery's index as raw HTML, a
figure's alt text from its English title, and its running and computation
times as sentences of its own; a translated page also says in one line, under
its stamp, where its code and output come from.
"""

import re

from docutils import nodes
from sphinx.locale import get_translation

from pagelib import gallery, layout, thumbnails, translation, wording

_ = get_translation(layout.SITE_CATALOG)


# -- What a translated page says about itself --------------------------------


def note_translated_output(app, doctree):
    """Under the stamp of a translated tutorial: where its output comes from."""
    if not layout.is_translation(app.config.language):
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
    if not layout.is_translation(app.config.language):
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


def translate_gallery_index(app, doctree):
    """The thumbnails of a gallery's index, titled and summarised in the
    page's language.

    Sphinx-Gallery writes each thumbnail's title and hover summary as raw
    HTML, which gettext never sees; they are taken here from the translated
    title and first paragraph of each page's own catalog.
    """
    if not layout.is_translation(app.config.language):
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
    thumbnails.translate(doctree, thumbnails.translations(app, docnames))


def translate_figure_alt(app, doctree):
    """Figures' alternative text in the page's language.

    Sphinx-Gallery takes a figure's alt text from its (English) title. A
    translation in the page's catalog is used where there is one;
    otherwise the figure is named by its number and the (translated) heading
    of the section it illustrates.
    """
    if not layout.is_translation(app.config.language):
        return
    from sphinx_gallery.directives import imgsgnode

    messages = translation.catalog(app.srcdir, app.config.language, app.env.docname)
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
    if not layout.is_translation(app.config.language):
        return
    if not app.env.docname.endswith("sg_execution_times"):
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


def setup(app):
    # After the stamp (verified_stamp's add_stamp, default priority), which
    # it finds by its class, verified-stamp.
    app.connect("doctree-read", note_translated_output, priority=600)
    app.connect("doctree-read", translate_running_time)
    app.connect("doctree-read", translate_gallery_index)
    app.connect("doctree-read", translate_figure_alt)
    # Before Sphinx records the page's title (priority 500), which the
    # <title> and the breadcrumb show.
    app.connect("doctree-read", translate_execution_times, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
