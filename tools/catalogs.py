"""Keep the translations' message catalogs in step with the English source.

``make catalogs`` runs ``update``; the tests run ``check``.

* The pages' prose is extracted with Sphinx's gettext builder (one template
  per document, ``gettext_compact = False``, no source locations), in a
  scratch copy of the project so that the working tree's gallery is left
  alone. Sphinx-Gallery's per-run "Total running time" lines and its
  computation-times pages are left out: they change with every run.
* The API reference's entries of the course's own package (the translated
  namespaces of ``pagelib.api_reference``) are documents of that build too,
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
is untranslated or fuzzy, as read by Babel's gettext reader.

    python tools/catalogs.py update [--language zh_CN]
    python tools/catalogs.py check  [--language zh_CN]
"""

import argparse
import datetime
import io
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
from pagelib import api_reference, layout, translation  # noqa: E402

# Messages that must not be translated through the catalogs.
DROPPED_DOCUMENTS = ("sg_execution_times", "tutorials/sg_execution_times")
DROPPED_PREFIXES = ("**Total running time of the script:**",)
# An API entry's title is its name, a literal the same in every language: an
# entry holds nothing else to translate when its object has no docstring.
API_FOLDER = api_reference.FOLDER
LITERAL_ONLY = re.compile(r"``[^`]+``")
WIDTH = 79
FIXED_DATE = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def page_templates():
    """{docname: babel Catalog} of the pages' prose, from Sphinx's gettext builder."""
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
        return templates


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


def expected_catalogs(language):
    """{path: text} of every catalog as it should be, and the stale files."""
    pages, site_po = catalog_paths(language)
    wanted = {}
    for docname, template in page_templates().items():
        path = pages / f"{docname}.po"
        wanted[path] = render(merged(template, path, language))
    wanted[site_po] = render(merged(site_template(), site_po, language))
    stale = [p for p in pages.rglob("*.po") if p not in wanted]
    return wanted, stale


def problems_in(path, language):
    with path.open("rb") as handle:
        catalog = read_po(handle, locale=language)
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
    return found


def update(language):
    wanted, stale = expected_catalogs(language)
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"updated {path.relative_to(REPO)}")
    for path in stale:
        path.unlink()
        print(f"removed {path.relative_to(REPO)} (its document is gone)")
    open_messages = [p for path in wanted for p in problems_in(path, language)]
    print(f"{len(open_messages)} messages to translate or review")


def check(language):
    wanted, stale = expected_catalogs(language)
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
        problems.extend(problems_in(path, language))
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
