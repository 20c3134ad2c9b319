"""Write each tutorial's downloadable notebook so that it reads well in Jupyter.

Sphinx-Gallery writes a notebook per example with its prose converted by a
handful of regular expressions, which leaves our cards, checklists, roles and
tables in the notebook as reST. Right after it has generated the gallery
(``builder-inited``), this extension writes every ``tutorials/<name>.ipynb``
again from the script, with the same cells (Sphinx-Gallery's own split of the
script into text and code blocks) and:

* prose converted by ``pagelib.markdown`` (docutils parses it, so every
  construct a page uses has a Markdown form or fails the build by name);
* a first code cell that sets up Matplotlib and names, in a commented-out
  ``%pip install`` line, every package the notebook imports (with ninja for
  the pages that compile C++), with the oldest version a page's ``NEEDS``
  dictionary asks for;
* the code of ``sphinx_gallery_start_ignore`` blocks kept (only the two flag
  lines go): the page hides that code, but a notebook must run alone;
* a line under the title saying which PyTorch releases and devices the page
  was verified on, from the same records as the page's stamp, and the
  Prerequisites card's floor as measured.

The gallery's "download all" zip files are then made again, so that they hold
these notebooks.
"""

import ast
import hashlib
import json
import re
import types
from pathlib import Path

import sphinx_gallery
from sphinx.locale import get_translation
from sphinx.util import logging
from sphinx_gallery import py_source_parser
from sphinx_gallery.downloads import generate_zipfiles

from pagelib import (
    checker,
    contract,
    gallery,
    layout,
    markdown,
    pagelint,
    records,
    run_record,
    translation,
    wording,
)

logger = logging.getLogger(__name__)
_ = get_translation(layout.SITE_CATALOG)

# Packages a page needs without importing them: ninja for any page that
# compiles C++ (cpp_extension or load_inline), setuptools for one that builds
# with cpp_extension or a setup.py.
NEEDED_BY = {
    "ninja": re.compile(r"\bcpp_extension\b|\bload_inline\b"),
    "setuptools": re.compile(r"\bcpp_extension\b|\bsetup\.py\b"),
}


def packages_for(source_text, baseurl="", repository=""):
    """The pip packages a script needs, in a stable order. The course's
    checker is named where the site publishes it (``checker_requirement``)."""
    needed = {"torch"}
    # The package of each import is the installed packages' own metadata
    # (pagelint.package_of); a module no package provides stops the build.
    for module in pagelint.imported_modules(source_text):
        try:
            needed.add(pagelint.package_of(module))
        except LookupError as error:
            raise markdown.UnsupportedMarkup(str(error)) from None
    for package, pattern in NEEDED_BY.items():
        if pattern.search(source_text):
            needed.add(package)
    minimums = needs(source_text)
    needed |= set(minimums)
    order = ["torch", "torchvision", "pillow", "numpy", "matplotlib"]
    names = sorted(needed, key=lambda p: (order.index(p) if p in order else 99, p))
    local = {checker.DISTRIBUTION: checker_requirement(baseurl, repository)}
    # Quoted, so that a shell does not read ">=" or "@" as a redirection.
    return [
        local.get(p) or (f'"{p}>={minimums[p]}"' if p in minimums else p) for p in names
    ]


def checker_requirement(baseurl, repository):
    """Where a notebook installs the course's checker from: the repository
    when its address is known (``REPOSITORY_URL``), else the wheel the site
    serves (``SITE_URL``), else the wheel's file name: the page links it, to
    download beside the notebook."""
    if repository:
        where = f"git+{repository.rstrip('/')}#subdirectory=operator_checker"
        return f'"{checker.DISTRIBUTION} @ {where}"'
    wheel = f"{checker.SERVED}/{checker.wheel_name()}"
    return f"{baseurl.rstrip('/')}/{wheel}" if baseurl else checker.wheel_name()


def needs(source_text):
    """The page's ``NEEDS = {"package": "oldest version"}``, or {}."""
    for node in ast.parse(source_text).body:
        if isinstance(node, ast.Assign) and [
            getattr(target, "id", None) for target in node.targets
        ] == ["NEEDS"]:
            return ast.literal_eval(node.value)
    return {}


def first_cell(packages):
    return (
        "%matplotlib inline\n# "
        + _("This notebook needs these packages; uncomment the line to install them:")
        + f"\n# %pip install {' '.join(packages)}"
    )


_TITLES = {}
# A section label in an example script's prose, and the heading under it.
SECTION_LABEL = re.compile(
    r"^# \.\. _([\w-]+):\n#\n# (.+)\n# ([=\-~^])\3+[ \t]*$", re.M
)


def page_titles(app):
    """Cross-reference label -> (docname, title in the build's language).

    Read once per build and language: every notebook's links need them all.
    """
    key = (id(app), app.config.language)
    if key not in _TITLES:
        _TITLES[key] = _read_page_titles(app)
    return _TITLES[key]


def _read_page_titles(app):

    def translated(docname, title):
        if not layout.is_translation(app.config.language):
            return title
        messages = translation.catalog(app.srcdir, app.config.language, docname)
        return messages.get(title, title)

    titles = {}
    examples = gallery.examples(app.config.sphinx_gallery_conf, app.srcdir)
    for docname, (source, _folder) in examples.items():
        title = contract.read_script(source)["title"]
        label = "sphx_glr_" + docname.replace("/", "_") + ".py"
        titles[label] = (docname, translated(docname, title))
        # A labelled section of the page (``.. _edge-name:`` above a
        # heading), linked by its anchor, which Sphinx names after the label.
        text = source.read_text(encoding="utf-8")
        for match in SECTION_LABEL.finditer(text):
            section = translated(docname, match.group(2).strip()).replace("``", "")
            titles[match.group(1).lower()] = (
                f"{docname}.html#{match.group(1)}",
                section,
            )
    for rst in Path(app.srcdir).glob("*.rst"):
        lines = rst.read_text(encoding="utf-8").splitlines()
        for line, under in zip(lines, lines[1:], strict=False):
            if line.strip() and re.fullmatch(r"([=\-~])\1+", under.strip()):
                titles[rst.stem] = (rst.stem, translated(rst.stem, line.strip()))
                break
    return titles


def resolver(titles, baseurl):
    def resolve(role, target, text):
        key = target if role == "doc" else target.lower()
        if key not in titles:
            raise markdown.UnsupportedMarkup(
                f":{role}:`{target}` names no page of the site"
            )
        where, title = titles[key]
        shown = markdown.MarkdownWriter.inline_text(text or title)
        if baseurl:
            address = where if "#" in where else f"{where}.html"
            return f"[{shown}]({baseurl.rstrip('/')}/{address})"
        return f"*{shown}*"

    return resolve


def verified_line(versions, record):
    sentences = []
    if versions.trusted:
        sentences.append(
            _(
                "This notebook's code ran to the end on PyTorch {releases} ({devices})."
            ).format(
                releases=wording.join_list(versions.passed),
                devices=wording.describe_devices(versions.devices),
            )
        )
    if record is not None:
        sentences.append(
            _(
                "The outputs on the site came from PyTorch {torch} on {devices}, {day}."
            ).format(
                torch=record["torch"],
                devices=wording.join_devices(record["devices"]),
                day=record["ran_at"][:10],
            )
        )
    if not sentences:
        return None
    # The label in bold, then the sentences, spaced as the language writes
    # them (no space after "：" or between Chinese sentences). The colon goes
    # after the bold: Markdown closes "**" only where it is not both preceded
    # by punctuation and followed by a letter, as in "**已验证：**本".
    label = str(_("Verified:"))
    text = wording.join_sentences([label, *sentences])
    word = label.rstrip(":：")
    return "> **" + word + "**" + text[len(word) :]


def notebook_for(blocks, markdown_of, packages, verified, versions):
    """The notebook of one script as a dict (nbformat 4)."""
    cells = [_code(first_cell(packages))]
    for index, (label, content, _line) in enumerate(blocks):
        if label == "code":
            cells.append(_code(content))
            continue
        text = markdown_of(content)
        if index == 0:
            text = _with_verified_floor(text, verified, versions)
        cells.append({"cell_type": "markdown", "metadata": {}, "source": text.rstrip()})
    for index, cell in enumerate(cells):
        cell["id"] = f"cell-{index:03d}"
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {
                "display_name": "Python 3",
                "language": "python",
                "name": "python3",
            },
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _with_verified_floor(text, verified, versions):
    lines = text.splitlines()
    if verified:
        title = next((i for i, line in enumerate(lines) if line.startswith("#")), -1)
        lines[title + 1 : title + 1] = ["", verified]
    text = "\n".join(lines)
    if versions.trusted:
        text = wording.stated_floor_pattern().sub(
            lambda match: wording.measured_floor(versions), text, count=1
        )
    return text


def _code(source):
    return {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {},
        "outputs": [],
        "source": source.strip(),
    }


def script_blocks(source):
    """The script's blocks as Sphinx-Gallery cuts them for its own notebook,
    without its configuration comments (the ignore blocks' flags among them)
    but with all of its code."""
    _file_conf, blocks = py_source_parser.split_code_and_text_blocks(source)
    cleaned = []
    for label, content, line in blocks:
        if label == "code":
            content = py_source_parser.remove_config_comments(content)
        cleaned.append((label, content, line))
    return cleaned


def build(app, source, folder, text_source=None):
    """The notebook of the example ``source`` as a dict.

    Its cells come from ``text_source`` when given (the script with its prose
    translated), its records and packages from ``source`` itself.
    """
    text = Path(source).read_text(encoding="utf-8")
    versions = records.read(app.srcdir, source)
    record, _problem = run_record.check(source, folder)
    levels = {}
    resolve = resolver(page_titles(app), app.config.html_baseurl)

    def markdown_of(content):
        return markdown.to_markdown(content, levels, resolve)

    return notebook_for(
        script_blocks(text_source or source),
        markdown_of,
        packages_for(text, app.config.html_baseurl, app.config.colab_repository),
        verified_line(versions, record),
        versions,
    )


def dumps(notebook):
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def code_files():
    """This module and every ``pagelib`` module it imports: the code a
    notebook is made by (the records' and the last run's verdicts are in its
    first cell, the markdown writer makes its prose)."""
    imported = [
        Path(module.__file__)
        for module in globals().values()
        if isinstance(module, types.ModuleType)
        and module.__name__.startswith("pagelib.")
    ]
    return [Path(__file__), *sorted(imported)]


def inputs_digest(app, source, folder, text_source=None):
    """A digest of everything a page's notebook is made from.

    The page and its records, its last run, the titles its links show (in the
    build's language), our strings' catalog, the code that makes it
    (``code_files``) and Sphinx-Gallery's version (its parser cuts the cells).
    A notebook whose digest has not changed is not made again, which keeps a
    build with nothing to do fast.
    """
    srcdir = Path(app.srcdir)
    source = Path(source)
    files = [
        *code_files(),
        source,
        srcdir / layout.RECORDS / f"{source.stem}.json",
        srcdir / layout.MATRIX,
        run_record.path_for(source, folder),
        Path(folder) / f"{source.name}.md5",
        layout.site_catalog_path(app.config.language),
    ]
    if text_source is not None:
        files.append(Path(text_source))
    # The titles the notebook's links show, in the build's language: another
    # page's edit changes this notebook only if it renames that page.
    titles = json.dumps(sorted(page_titles(app).items()), ensure_ascii=False)
    digest = hashlib.sha256(
        f"{sphinx_gallery.__version__}\0{app.config.html_baseurl}\0{titles}\0".encode()
    )
    for path in files:
        digest.update(str(path).encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"-")
    return digest.hexdigest()


def write_if_outdated(path, make, inputs):
    """Write ``make()`` (a notebook dict) to ``path`` unless the notebook there
    was made from the same ``inputs`` and has not been overwritten since
    (Sphinx-Gallery writes its own notebook of a page it runs)."""
    stamp = path.with_name(path.name + ".inputs")
    if path.is_file() and stamp.is_file():
        made_from, content_digest = stamp.read_text().split()
        current = hashlib.sha256(path.read_bytes()).hexdigest()
        if made_from == inputs and content_digest == current:
            return
    content = dumps(make())
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != content:
        path.write_text(content, encoding="utf-8")
    digest = hashlib.sha256(content.encode()).hexdigest()
    stamp.write_text(f"{inputs} {digest}\n")


def write_notebooks(app):
    if layout.is_translation(app.config.language):
        return  # a translated edition's notebooks: translated_downloads
    gallery_conf = app.config.sphinx_gallery_conf
    written_galleries = set()
    for docname, (source, folder) in gallery.examples(gallery_conf, app.srcdir).items():
        path = folder / f"{source.stem}.ipynb"
        try:
            write_if_outdated(
                path,
                lambda source=source, folder=folder: build(app, source, folder),
                inputs_digest(app, source, folder),
            )
        except markdown.UnsupportedMarkup as error:
            logger.warning(
                "%s: the notebook cannot be written: %s",
                source.name,
                error,
                location=docname,
                type="notebooks",
            )
            continue
        written_galleries.add(folder)
    if gallery_conf.get("download_all_examples"):
        for folder in sorted(written_galleries):
            generate_zipfiles(folder, app.srcdir, gallery_conf)


def setup(app):
    # After Sphinx-Gallery generated the gallery.
    app.connect("builder-inited", write_notebooks, priority=layout.NOTEBOOKS_PRIORITY)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
