"""The ``.py`` and ``.ipynb`` downloads of a translated page, in its language.

A translated page's download buttons must give a reader the script they can
read: the page's prose in the page's language, around code identical to the
English script's. Before the translated edition is read, ``make_downloads``
writes, for every example, ``tutorials_<language>/<name>.py`` from
``advanced/<name>.py`` with each prose message replaced by its translation from
the page's catalog (``locale/<language>/LC_MESSAGES/tutorials/<name>.po``),
the notebook from that script (``notebooks.build``), and the gallery's two zip
files. ``point_downloads`` then makes the page's download links point at them.

The translation itself, strings in and strings out, is
``pagelib.translation``.
"""

import hashlib
from pathlib import Path

import notebooks
from docutils import nodes
from sphinx.util import logging
from sphinx_gallery.utils import zip_files

from pagelib import gallery, layout, translation

logger = logging.getLogger(__name__)


def folder_for(app):
    return layout.translated_downloads(app.srcdir, app.config.language)


# -- The downloads -------------------------------------------------------------


def make_downloads(app):
    """Write every example's translated script, notebook and the zip files."""
    if not layout.is_translation(app.config.language):
        return
    language = app.config.language
    target = folder_for(app)
    target.mkdir(exist_ok=True)
    gallery_conf = app.config.sphinx_gallery_conf
    scripts, notebook_files = [], []
    for docname, (source, folder) in gallery.examples(gallery_conf, app.srcdir).items():
        translations = translation.catalog(app.srcdir, language, docname)
        script = target / source.name
        english = source.read_text(encoding="utf-8")
        # Translate again only when the script, its catalog or the
        # translation code changed since the last build.
        key = hashlib.sha256(english.encode())
        for path in (
            Path(translation.__file__),
            layout.catalog_path(app.srcdir, language, docname),
        ):
            key.update(path.read_bytes() if path.is_file() else b"-")
        stamp = script.with_name(script.name + ".inputs")
        if not (
            script.is_file()
            and stamp.is_file()
            and stamp.read_text().strip() == key.hexdigest()
        ):
            text, _ = translation.translate_script(english, translations)
            _write(script, text)
            stamp.write_text(key.hexdigest() + "\n")
        notebook_file = script.with_suffix(".ipynb")
        try:
            notebooks.write_if_outdated(
                notebook_file,
                lambda source=source, folder=folder, script=script: notebooks.build(
                    app, source, folder, text_source=script
                ),
                notebooks.inputs_digest(app, source, folder, text_source=script),
            )
        except Exception as error:  # noqa: BLE001 - reported as a build warning
            logger.warning(
                "%s: no translated notebook: %s",
                source.name,
                error,
                location=docname,
                type="translated_downloads",
            )
            continue
        scripts.append(str(script))
        notebook_files.append(str(notebook_file))
    # The archives carry the English gallery's names, which the download
    # links name; Sphinx-Gallery's own zip writer makes them.
    (_examples_dir, gallery_dir), *_ = gallery.galleries(gallery_conf, app.srcdir)
    for files, kind in [(scripts, "python"), (notebook_files, "jupyter")]:
        zip_files(sorted(files), str(target / f"{gallery_dir.name}_{kind}.zip"), target)


def _write(path, text):
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def point_downloads(app, doctree):
    """Make the page's download links fetch the translated files."""
    if not layout.is_translation(app.config.language):
        return
    target = folder_for(app)
    relative = "/" + target.relative_to(app.srcdir).as_posix()
    for node in doctree.findall(nodes.Element):
        if node.tagname != "download_reference":
            continue
        name = Path(node["reftarget"]).name
        if (target / name).is_file():
            node["reftarget"] = f"{relative}/{name}"


def setup(app):
    # After Sphinx-Gallery and notebooks.py.
    app.connect(
        "builder-inited", make_downloads, priority=layout.TRANSLATED_DOWNLOADS_PRIORITY
    )
    # Before Sphinx collects the files that downloads refer to (500).
    app.connect("doctree-read", point_downloads, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
