"""Every piece a page needs besides its script, and what is missing, by file.

A tutorial is ``advanced/<name>.py`` plus pieces kept elsewhere
(``docs/dev/adding-a-page.md``). For every page, ``missing`` names each piece
that is absent or out of date, one line each, as ``<page>: <what> — <the file
to edit or the command to run>``:

* its place and one-line summary in the course (``pagelib/course.toml``),
  where no entry may name a page that does not exist;
* its docstring's card fields: title, introductory paragraph, Prerequisites
  card with its floor, Checklist (``contract.read_script``);
* its row in the "Which page do I need?" table (``start_here.rst``);
* its version records, present and current (``records.read`` decides; the
  build refuses the same problems);
* its catalog in each translation (``locale/<language>/``);
* for each third-party module it imports, the package that provides it
  (``package_of``), pinned by ``requirements.txt`` or ``constraints.txt`` and
  in the version matrix's environments (``versions/matrix.toml``).

Nothing runs a page or Sphinx, so ``make check`` runs it first, in well
under a second: ``python -m pagelib.pagelint`` prints the lines and exits 1
when there are any.

``package_of`` is also what the notebooks' install line is made from
(``_ext/notebooks.py``): the module-to-package mapping is the installed
packages' own metadata (``importlib.metadata.packages_distributions``), so no
table of ours has to learn a new import.
"""

import ast
import functools
import importlib.metadata
import sys
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from pagelib import checker, contract, course, records

PAGES = Path("advanced")
GALLERY = "tutorials"  # conf.py's gallery_dirs: the pages' reference labels
START_HERE = Path("start_here.rst")
LOCALE = Path("locale")
REQUIREMENTS = ("requirements.txt", "constraints.txt")
SUMMARY_LIMIT = 90  # characters at most: a card's summary stays on one or two lines


def imported_modules(source_text):
    """The top-level third-party modules a script imports, in a stable order."""
    modules = set()
    for node in ast.walk(ast.parse(source_text)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names:
                modules.add(top)
    return sorted(modules)


@functools.cache
def _providers():
    return importlib.metadata.packages_distributions()


def package_of(module):
    """The package (canonical name) that provides ``module`` in this
    environment; LookupError, saying what to edit, when none does."""
    packages = sorted({canonicalize_name(p) for p in _providers().get(module, [])})
    if not packages:
        raise LookupError(
            f"it imports {module}, which no installed package provides — pin the "
            f"package in requirements.txt and constraints.txt, then run make"
        )
    if len(packages) > 1:
        raise LookupError(f"it imports {module}, provided by {', '.join(packages)}")
    return packages[0]


def pinned(root):
    """The packages requirements.txt and constraints.txt pin, and the course's
    checker, which every environment installs from the checkout."""
    names = {checker.DISTRIBUTION}
    for filename in REQUIREMENTS:
        for line in (Path(root) / filename).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-"):
                try:
                    names.add(canonicalize_name(Requirement(line).name))
                except InvalidRequirement:
                    continue
    return names


def in_matrix_environments(root):
    """The packages every environment of the version matrix holds: torch and
    what each release installs with it, the ``[pages] packages``, and what
    those depend on (as installed here)."""
    matrix = tomllib.loads((Path(root) / records.MATRIX).read_text())
    wanted = ["torch", *matrix.get("pages", {}).get("packages", [])]
    for release in matrix.get("below", []) + matrix.get("releases", []):
        wanted += release.get("with", [])
    found = {checker.DISTRIBUTION}  # installed from the checkout (tools/envs.py)
    todo = [canonicalize_name(Requirement(w).name) for w in wanted]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        todo += _dependencies(name)
    return found


@functools.cache
def _dependencies(package):
    """The packages ``package``, as installed here, needs (no extras)."""
    try:
        requires = importlib.metadata.requires(package) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    environment = {**default_environment(), "extra": ""}
    return [
        canonicalize_name(requirement.name)
        for requirement in map(Requirement, requires)
        if requirement.marker is None or requirement.marker.evaluate(environment)
    ]


def missing(root):
    """One line per piece missing from any page of the project in ``root``."""
    root = Path(root)
    summaries = {f: page.summary for f, page in course.read(root).items()}
    start_here = (root / START_HERE).read_text(encoding="utf-8")
    languages = sorted(
        folder.name
        for folder in (root / LOCALE).glob("*")
        if (folder / "LC_MESSAGES").is_dir()
    )
    packages_pinned = pinned(root)
    packages_in_matrix = in_matrix_environments(root)
    lines = []
    for source in sorted((root / PAGES).glob("*.py")):
        name = source.stem
        script = PAGES / source.name

        def needs(what, fix, name=name):
            lines.append(f"{name}: {what} — {fix}")

        if not summaries.get(source.name):
            needs("no place or summary in the course", f"edit {course.COURSE_FILE}")
        elif "\n" in summaries[source.name]:
            needs("its course summary is not one line", f"edit {course.COURSE_FILE}")
        elif len(summaries[source.name]) > SUMMARY_LIMIT:
            needs(
                f"its course summary has {len(summaries[source.name])} characters, "
                f"{SUMMARY_LIMIT} at most",
                f"edit {course.COURSE_FILE}",
            )
        for problem in contract.read_script(source)["problems"]:
            needs(problem, f"edit {script}")
        if f":ref:`sphx_glr_{GALLERY}_{name}.py`" not in start_here:
            needs('no row in "Which page do I need?"', f"edit {START_HERE}")
        if not (root / records.RECORDS / f"{name}.json").is_file():
            needs("no version records", f"run `make matrix PAGES={name}`")
        else:
            for problem in records.read(root, source).problems:
                fix = f"run `make matrix PAGES={name}`"
                if fix in problem:
                    needs(problem.removesuffix(f"; {fix}"), fix)
                else:
                    needs(problem, f"edit {script}")
        for language in languages:
            catalog = LOCALE / language / "LC_MESSAGES" / GALLERY / f"{name}.po"
            if not (root / catalog).is_file():
                needs(
                    f"no {language} catalog",
                    f"run `make catalogs`, then translate {catalog}",
                )
        for module in imported_modules(source.read_text(encoding="utf-8")):
            try:
                package = package_of(module)
            except LookupError as error:
                lines.append(f"{name}: {error}")
                continue
            if package not in packages_pinned:
                needs(
                    f"it imports {module}, from {package}, which no requirements "
                    "file pins",
                    "edit requirements.txt and constraints.txt",
                )
            if package not in packages_in_matrix:
                needs(
                    f"it imports {module}, from {package}, which the version "
                    "matrix's environments lack",
                    f"edit {records.MATRIX} ([pages] packages)",
                )
    for filename in summaries:
        if not (root / PAGES / filename).is_file():
            lines.append(
                f"{Path(filename).stem}: in the course, but {PAGES / filename} does "
                f"not exist — edit {course.COURSE_FILE}"
            )
    return lines


def main():
    lines = missing(Path.cwd())
    for line in lines:
        print(line)
    # Out before the count on stderr, or a pipe shows them run together.
    sys.stdout.flush()
    if lines:
        print(
            f"{len(lines)} missing piece(s); see docs/dev/adding-a-page.md",
            file=sys.stderr,
        )
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
