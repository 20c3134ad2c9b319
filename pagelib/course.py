"""The course: the tutorials in order, and what the site knows of each.

The course is data, in ``course.toml`` beside this module: one table per page,
``[<script name without .py>]``, in course order, so a page is placed (and a
test places a scratch page, ``add_page``) without editing Python. A page's
table holds every fact about it that its script cannot say (``Page``): its
one-line summary, whether it has no CUDA path by design (``cpu_only``), and
whether it builds wheels (``builds_wheels``). A setting this module does not
know is refused by name. ``PAGES`` maps each page's file name to its ``Page``,
in course order; ``COURSE`` to its summary.

What a page's script says stays in the script: its title, floor and checklist
(``pagelib.contract``), the packages it imports (``pagelint.package_of``) and
the oldest versions of its tools (its ``NEEDS`` dictionary, which the page
itself checks when a reader runs it).

Sphinx-Gallery sorts the examples of a gallery with a key class that it builds
from the gallery's source directory (``within_subsection_order``).
``CourseOrder`` places the pages listed in ``COURSE`` first, in that order,
and any page not listed yet after them, by file name, so a new page shows up
before it has been given its place. The landing page's cards show each page's
summary from ``COURSE`` (see ``tutorial_cards``), and warn about a page that
is missing from it.
"""

import dataclasses
import json
import tomllib
from pathlib import Path

from sphinx_gallery.sorting import FileNameSortKey

COURSE_FILE = Path("pagelib") / "course.toml"


@dataclasses.dataclass(frozen=True)
class Page:
    """A page's table in ``course.toml``."""

    summary: str = ""
    cpu_only: bool = False
    builds_wheels: bool = False


SETTINGS = {field.name: field.type for field in dataclasses.fields(Page)}


def read(root):
    """{page file name: ``Page``} of the project in ``root``, in course order;
    ValueError naming the page for a setting ``Page`` does not have or of the
    wrong type."""
    text = (Path(root) / COURSE_FILE).read_text(encoding="utf-8")
    pages = {}
    for name, table in tomllib.loads(text).items():
        if not isinstance(table, dict):
            raise ValueError(f"{COURSE_FILE}: {name} is not a table ([{name}])")
        for key, value in table.items():
            wanted = SETTINGS.get(key)
            if wanted is None:
                raise ValueError(
                    f"{COURSE_FILE}: [{name}] has {key}, which is not one of "
                    f"{', '.join(SETTINGS)}"
                )
            if not isinstance(value, wanted):
                raise ValueError(
                    f"{COURSE_FILE}: [{name}] {key} is not a {wanted.__name__}"
                )
        pages[f"{name}.py"] = Page(**table)
    return pages


def add_page(root, filename, summary):
    """Place ``filename`` last in the course of the project in ``root``, with
    ``summary``; a page the course already lists moves there, without its
    other settings."""
    path = Path(root) / COURSE_FILE
    header = f"[{Path(filename).stem}]"
    kept, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.startswith("["):
            inside = line.strip() == header
        if not inside:
            kept.append(line)
    # A JSON string is a TOML basic string.
    kept.append(f"\n{header}\nsummary = {json.dumps(summary, ensure_ascii=False)}\n")
    path.write_text("".join(kept), encoding="utf-8")


PAGES = read(Path(__file__).resolve().parent.parent)
COURSE = {filename: page.summary for filename, page in PAGES.items()}


def cpu_only():
    """The pages with no CUDA path by design, by name (no ``.py``)."""
    return [Path(filename).stem for filename, page in PAGES.items() if page.cpu_only]


def builds_wheels():
    """The pages that build wheels, by name (no ``.py``)."""
    return [Path(f).stem for f, page in PAGES.items() if page.builds_wheels]


class CourseOrder(FileNameSortKey):
    """Sort key: a page's position in ``COURSE``, then its file name.

    Sphinx-Gallery's base class gives it the constructor and the stable repr
    that Sphinx compares to decide whether the configuration changed.
    """

    def __call__(self, filename):
        pages = list(COURSE)
        position = pages.index(filename) if filename in pages else len(pages)
        return (position, super().__call__(filename))
