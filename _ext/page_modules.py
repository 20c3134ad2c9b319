"""Write the modules that pages publish, for their ``:download:`` links.

``conf.py``'s ``page_modules`` names, per page, the section that is a module
and the module's file name and one-line summary. Right after Sphinx-Gallery
has generated the gallery (``builder-inited``), each module is written into
``tutorial_modules/`` at the top of the source tree (a page links it as
``:download:`name </tutorial_modules/name>```; in the gallery's folders,
Sphinx-Gallery's "download all" archives would take it for an example) from
the page's current source
(``pagelib.page_module``), so that the file a reader downloads is the code
this build ran. A section that is missing, or holds no code, fails the build
with the page's name.
"""

from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

from pagelib import contract, gallery, page_module

logger = logging.getLogger(__name__)
FOLDER = "tutorial_modules"


def docstring(stem, summary, section, script, baseurl):
    fields = contract.read_script(script)
    _, floor = contract.declared_floors(script.read_text(encoding="utf-8"))
    where = f'the page "{fields["title"]}"'
    if baseurl:
        where += f" ({baseurl.rstrip('/')}/tutorials/{script.stem}.html)"
    return (
        f"{stem}: {summary}\n\n"
        f'The code of the section "{section}" of {where}, which explains each\n'
        f"part and runs this same code. It needs PyTorch {floor} or later and\n"
        "nothing else."
    )


def write_modules(app):
    pages = gallery.examples(app.config.sphinx_gallery_conf, app.srcdir)
    by_name = {source.name: (source, folder) for source, folder in pages.values()}
    for page, settings in app.config.page_modules.items():
        if page not in by_name:
            # A build of some pages only (a test's scratch project). A page that
            # links a module that was not written fails on its dangling link.
            continue
        script, _folder = by_name[page]
        filename = settings["module"]
        text = docstring(
            filename.removesuffix(".py"),
            settings["summary"],
            settings["section"],
            script,
            app.config.html_baseurl,
        )
        try:
            module = page_module.module_source(
                script.read_text(encoding="utf-8"), settings["section"], text
            )
        except page_module.NoSuchSection as problem:
            raise ExtensionError(f"page_modules: {page}: {problem}") from None
        target = Path(app.srcdir) / FOLDER / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_text(encoding="utf-8") != module:
            target.write_text(module, encoding="utf-8")
            logger.info("page_modules: wrote %s from %s", target.name, page)


def setup(app):
    app.add_config_value("page_modules", {}, "html", types=[dict])
    # After Sphinx-Gallery has made the gallery folders (builder-inited, 500),
    # before any page that links the module is read.
    app.connect("builder-inited", write_modules, priority=550)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
