"""Our extensions' own strings in the edition's language, and the site named
in it.

The stamp, the card footers, the floor and the other strings of ``_ext/`` and
``pagelib/wording.py`` come from the catalog
``_ext/locale/<language>/LC_MESSAGES/site.po`` (``tools/catalogs.py`` keeps it
current); it is compiled here when it changed, and handed to Sphinx. In a
translated edition, the site's title, its search box and its footer's authors
are then given in that language.
"""

from sphinx.locale import get_translation

from pagelib import layout

_ = get_translation(layout.SITE_CATALOG)


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
    if not layout.is_translation(config.language):
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
    app.connect("config-inited", register_catalog)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
