"""Every page of advanced/ against what the site needs of it, checked
without building: its card, its course entry, its start_here row, its
headings and its version records. Pure reads, so they run in the fast lane
(`make check`) and name the page and the fix.
"""

import re

import pytest
from sphinx_gallery import py_source_parser

from pagelib import pagelint, records
from tests.support.pages import REPO, pinned_torch

EXAMPLES = sorted(p.stem for p in (REPO / "advanced").glob("*.py"))
RELEASES = records.matrix_releases(REPO)


@pytest.fixture(scope="module")
def lint_lines():
    return pagelint.missing(REPO)


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_page_lint_finds_nothing_missing(name, lint_lines):
    # Card fields, course entry, start_here row, records present and current,
    # catalogs and packages: the lint's list (pagelib/pagelint.py), by page.
    lines = [line for line in lint_lines if line.startswith(f"{name}: ")]
    assert lines == []


def test_no_course_entry_names_a_missing_page(lint_lines):
    assert [line for line in lint_lines if ": in the course, but " in line] == []


@pytest.mark.parametrize("name", EXAMPLES)
def test_no_section_is_stuck_in_a_code_cell(name):
    # A heading written in comments without `# %%` before it stays inside the
    # code cell above: the reader sees it as code, and it is not translated.
    _, blocks = py_source_parser.split_code_and_text_blocks(
        str(REPO / "advanced" / f"{name}.py")
    )
    stuck = [
        f"line {start + index}: {lines[index - 1]!r}"
        for label, content, start in blocks
        if label == "code"
        for lines in [content.split("\n")]
        for index in range(1, len(lines))
        if re.match(r"^# ([=\-~^])\1{3,}$", lines[index])
        and lines[index - 1].startswith("# ")
    ]
    assert not stuck, f"headings inside code cells (add `# %%` above them): {stuck}"


def test_matrix_ends_with_the_pinned_release():
    assert RELEASES[-1] == pinned_torch()
    keys = [records.minor(r) for r in RELEASES]
    assert keys == sorted(set(keys), key=lambda v: tuple(map(int, v.split("."))))
