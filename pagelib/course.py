"""The course: the order of the tutorials and a one-line summary of each.

The course is data, in ``course.toml`` beside this module: one line per page,
``<script name without .py> = "<summary>"``, in course order, so a page is
placed (and a test places a scratch page, ``add_page``) without editing
Python. ``COURSE`` maps each page's file name to its summary, in that order.

Sphinx-Gallery sorts the examples of a gallery with a key class that it builds
from the gallery's source directory (``within_subsection_order``).
``CourseOrder`` places the pages listed in ``COURSE`` first, in that order,
and any page not listed yet after them, by file name, so a new page shows up
before it has been given its place. The landing page's cards show each page's
summary from ``COURSE`` (see ``tutorial_cards``), and warn about a page that
is missing from it.
"""

import json
import tomllib
from pathlib import Path

from sphinx_gallery.sorting import FileNameSortKey

COURSE_FILE = Path("pagelib") / "course.toml"


def read(root):
    """{page file name: summary} of the project in ``root``, in course order."""
    pages = tomllib.loads((Path(root) / COURSE_FILE).read_text(encoding="utf-8"))
    return {f"{name}.py": summary for name, summary in pages.items()}


def add_page(root, filename, summary):
    """Place ``filename`` last in the course of the project in ``root``, with
    ``summary``; a page the course already lists moves there."""
    path = Path(root) / COURSE_FILE
    stem = Path(filename).stem
    kept = [
        line
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
        if line.split("=", 1)[0].strip() != stem
    ]
    # A JSON string is a TOML basic string.
    kept.append(f"{stem} = {json.dumps(summary, ensure_ascii=False)}\n")
    path.write_text("".join(kept), encoding="utf-8")


COURSE = read(Path(__file__).resolve().parent.parent)


class CourseOrder(FileNameSortKey):
    """Sort key: a page's position in ``COURSE``, then its file name.

    Sphinx-Gallery's base class gives it the constructor and the stable repr
    that Sphinx compares to decide whether the configuration changed.
    """

    def __call__(self, filename):
        pages = list(COURSE)
        position = pages.index(filename) if filename in pages else len(pages)
        return (position, super().__call__(filename))
