"""Keep the translations' message catalogs in step with the English source.

``make catalogs`` runs ``update``; the tests run ``check``.

* The pages' prose is extracted with Sphinx's gettext builder (one template
  per document, ``gettext_compact = False``, no source locations), in a
  scratch copy of the project so that the working tree's gallery is left
  alone. Sphinx-Gallery's per-run "Total running time" lines and its
  computation-times pages are left out: they change with every run.
* The API reference's entries of the course's own package (the translated
  namespaces of ``pagelib.api_names``) are documents of that build too,
  their docstrings included: the build writes one for each name of the
  package's public API, since which of them the site shows depends on the
  pages' run. An entry whose docstring has no prose gets no catalog (its
  title is the name, a literal).
* Our extensions' own strings (``_()`` in ``_ext/*.py``) are extracted with
  Babel into the ``site`` catalog.

``update`` merges both into the catalogs under ``locale/<language>/`` and
``_ext/locale/<language>/`` with Babel: new messages arrive untranslated, a
changed message keeps its old translation marked fuzzy for review, removed ones
go. ``check`` reports any catalog that is not current, and every message that
is untranslated or fuzzy (as read by Babel's gettext reader), leaves English
prose in its translation, or puts a visible space between Chinese text and a
link whose text shows Chinese (the titles of ``:ref:`` and ``:doc:`` links
are taken from the gettext build's environment and their catalogs).

    python tools/catalogs.py update [--language zh_CN]
    python tools/catalogs.py check  [--language zh_CN]
"""

import argparse
import datetime
import io
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from pagelib import api_names, layout, translation  # noqa: E402

# Messages that must not be translated through the catalogs.
DROPPED_DOCUMENTS = ("sg_execution_times", "tutorials/sg_execution_times")
DROPPED_PREFIXES = ("**Total running time of the script:**",)
# An API entry's title is its name, a literal the same in every language: an
# entry holds nothing else to translate when its object has no docstring.
API_FOLDER = api_names.FOLDER
LITERAL_ONLY = re.compile(r"``[^`]+``")
WIDTH = 79
FIXED_DATE = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def page_templates():
    """({docname: babel Catalog} of the pages' prose, the titles links show),
    from Sphinx's gettext builder.

    The titles are ``{("ref", label) or ("doc", docname): (the docname that
    holds the title, the title in English)}``, as the build's environment
    knows them: what a ``:ref:`` or ``:doc:`` without a text of its own shows.
    """
    with tempfile.TemporaryDirectory(prefix="catalogs-") as scratch:
        copy = Path(scratch) / "project"
        for name in layout.project_files():
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target)
        output = copy / "_build" / "gettext"
        process = subprocess.run(
            [sys.executable, "-m", "sphinx", "-b", "gettext", "-q"]
            + ["-D", "plot_gallery=0", ".", str(output)],
            cwd=copy,
            capture_output=True,
            text=True,
        )
        if process.returncode != 0:
            sys.exit(f"the gettext build failed:\n{process.stderr[-4000:]}")
        templates = {}
        for pot in sorted(output.rglob("*.pot")):
            docname = pot.relative_to(output).with_suffix("").as_posix()
            if docname in DROPPED_DOCUMENTS:
                continue
            with pot.open("rb") as handle:
                catalog = read_po(handle)
            entry = docname.startswith(API_FOLDER + "/")
            for message in list(catalog):
                if message.id and (
                    str(message.id).startswith(DROPPED_PREFIXES)
                    or (entry and LITERAL_ONLY.fullmatch(str(message.id)))
                ):
                    catalog.delete(message.id, message.context)
            if entry and not any(message.id for message in catalog):
                continue
            templates[docname] = catalog
        return templates, link_targets(output / ".doctrees" / "environment.pickle")


def link_targets(pickled_environment):
    """The titles a link without a text of its own shows, from the gettext
    build's environment: every label's section and every document's title."""
    sys.path.insert(0, str(REPO / "_ext"))  # what the environment refers to
    with pickled_environment.open("rb") as handle:
        environment = pickle.load(handle)
    targets = {
        ("ref", label): (docname, str(title))
        for label, (docname, _anchor, title) in environment.domaindata["std"][
            "labels"
        ].items()
        if title
    }
    for docname, title in environment.titles.items():
        targets["doc", docname] = (docname, str(title.astext()))
    return targets


def link_titles(targets, language):
    """{("ref", label) or ("doc", docname): the title as ``language``'s
    edition shows it}: the English title's translation in its document's
    catalog, or the English title where that has none."""
    plain = {}
    titles = {}
    for key, (docname, english) in targets.items():
        if docname not in plain:
            plain[docname] = {
                translation.visible_text(message): translated
                for message, translated in translation.catalog(
                    REPO, language, docname
                ).items()
            }
        titles[key] = plain[docname].get(translation.visible_text(english), english)
    return titles


def site_template():
    """Our extensions' strings, as Babel extracts them from ``_ext`` and
    ``pagelib`` (the wording the extensions share)."""
    catalog = Catalog(project="PyTorch Custom Operators", fuzzy=False)
    for folder in ("_ext", "pagelib"):
        for _filename, _lineno, message, comments, context in extract_from_dir(
            str(REPO / folder),
            method_map=[("*.py", "python")],
            keywords={"_": None},
        ):
            catalog.add(message, None, [], auto_comments=comments, context=context)
    return catalog


def catalog_paths(language):
    """(the folder of the pages' catalogs, the extensions' catalog)."""
    return layout.catalogs(REPO, language), layout.site_catalog_path(language)


def render(catalog):
    buffer = io.BytesIO()
    write_po(
        buffer,
        catalog,
        width=WIDTH,
        no_location=True,
        omit_header=False,
        ignore_obsolete=True,
        include_previous=False,
        include_lineno=False,
    )
    return buffer.getvalue().decode("utf-8")


def merged(template, existing_path, language):
    if existing_path.is_file():
        with existing_path.open("rb") as handle:
            catalog = read_po(handle, locale=language)
    else:
        catalog = Catalog(locale=language, project="PyTorch Custom Operators")
    catalog.update(template, no_fuzzy_matching=False, update_header_comment=False)
    # Dates in the header would change with every extraction.
    catalog.creation_date = catalog.revision_date = FIXED_DATE
    catalog.fuzzy = False
    return catalog


def fill_page_boilerplate(catalogs):
    """Translate, in each page's catalog, the messages that another page's
    catalog already translates but for the page's own name: Sphinx-Gallery's
    "Go to the end" note and download links, one copy per page. Babel's fuzzy
    guess for them keeps the other page's name in its link; here the name is
    the page's own and the message is done. ``{docname: Catalog}``, in place."""
    # The gallery's pages only: their names are file names, never words.
    name_of = {
        d: d.rpartition("/")[2]
        for d in catalogs
        if d.startswith("tutorials/") and d != "tutorials/index"
    }
    known = {}
    for docname in sorted(name_of):
        name = name_of[docname]
        for message in catalogs[docname]:
            if (
                isinstance(message.id, str)
                and name in message.id
                and message.string
                and not message.fuzzy
            ):
                key = message.id.replace(name, "\0")
                known.setdefault(key, message.string.replace(name, "\0"))
    for docname, name in name_of.items():
        for message in catalogs[docname]:
            if not isinstance(message.id, str) or name not in message.id:
                continue
            if message.string and not message.fuzzy:
                continue
            translated = known.get(message.id.replace(name, "\0"))
            if translated is not None:
                message.string = translated.replace("\0", name)
                message.flags.discard("fuzzy")


def expected_catalogs(language):
    """({path: text} of every catalog as it should be, the stale files, the
    titles links show in ``language``)."""
    pages, site_po = catalog_paths(language)
    wanted = {}
    templates, targets = page_templates()
    catalogs = {
        docname: merged(template, pages / f"{docname}.po", language)
        for docname, template in templates.items()
    }
    fill_page_boilerplate(catalogs)
    for docname, catalog in catalogs.items():
        wanted[pages / f"{docname}.po"] = render(catalog)
    wanted[site_po] = render(merged(site_template(), site_po, language))
    stale = [p for p in pages.rglob("*.po") if p not in wanted]
    return wanted, stale, link_titles(targets, language)


def problems_in(path, language, titles=None):
    """What is wrong with one catalog: fuzzy and untranslated messages,
    English prose left in a translation, links that point elsewhere than
    their English, and a visible space between Chinese
    text and a link whose text is Chinese (``titles``: what links without a
    text of their own show, as ``link_titles`` returns them)."""
    with path.open("rb") as handle:
        catalog = read_po(handle, locale=language)
    pages = layout.catalogs(REPO, language)
    docname = (
        path.relative_to(pages).with_suffix("").as_posix()
        if path.is_relative_to(pages)
        else None
    )
    found = []
    for message in catalog:
        if not message.id:
            continue
        shown = str(message.id if isinstance(message.id, str) else message.id[0])[:60]
        strings = (
            message.string if isinstance(message.string, tuple) else (message.string,)
        )
        if message.fuzzy:
            found.append(f"{path.relative_to(REPO)}: fuzzy: {shown!r}")
        elif not all(strings):
            found.append(f"{path.relative_to(REPO)}: untranslated: {shown!r}")
        else:
            left = [p for s in strings for p in translation.english_in_translation(s)]
            if left:
                found.append(
                    f"{path.relative_to(REPO)}: English left in the translation of "
                    f"{shown!r}: {'; '.join(left)} (quote program text as ``literal``)"
                )
            english = translation.link_targets(
                message.id if isinstance(message.id, str) else message.id[0]
            )
            moved = [
                target
                for s in strings
                for target in [translation.link_targets(s)]
                if target != english
            ]
            if moved:
                found.append(
                    f"{path.relative_to(REPO)}: the translation of {shown!r} links "
                    f"elsewhere than its English: {moved[0]} for {english} (keep "
                    "every target; change only the text a link shows)"
                )
            spaced = [
                link
                for s in strings
                for link in translation.spaces_beside_chinese_links(
                    s, titles or {}, docname
                )
            ]
            if spaced:
                found.append(
                    f"{path.relative_to(REPO)}: a space between Chinese text and "
                    f"the link {' / '.join(spaced)!r} in the translation of "
                    f"{shown!r} (write `\\ ` there, or reword)"
                )
    return found


def update(language):
    wanted, stale, titles = expected_catalogs(language)
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"updated {path.relative_to(REPO)}")
    for path in stale:
        path.unlink()
        print(f"removed {path.relative_to(REPO)} (its document is gone)")
    open_messages = [p for path in wanted for p in problems_in(path, language, titles)]
    print(f"{len(open_messages)} messages to translate or review")


def check(language):
    wanted, stale, titles = expected_catalogs(language)
    problems = [f"{p.relative_to(REPO)}: its document is gone" for p in stale]
    for path, text in wanted.items():
        if not path.is_file():
            problems.append(f"{path.relative_to(REPO)}: missing")
            continue
        if path.read_text(encoding="utf-8") != text:
            problems.append(
                f"{path.relative_to(REPO)}: not current with the English source "
                "(run `make catalogs`)"
            )
        problems.extend(problems_in(path, language, titles))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["update", "check"])
    parser.add_argument("--language", action="append")
    args = parser.parse_args()
    for language in args.language or layout.TRANSLATIONS:
        if args.command == "update":
            update(language)
        else:
            problems = check(language)
            print("\n".join(problems) or f"{language}: every catalog is current")
            if problems:
                sys.exit(1)


if __name__ == "__main__":
    main()
