"""Every page of advanced/ against what the site needs of it, checked
without building: its card, its course entry, its start_here row, its
headings and its version records. Pure reads, so they run in the fast lane
(`make check`) and name the page and the fix.
"""

import re

import pytest
from sphinx_gallery import py_source_parser

from pagelib import contract
from pagelib import records as version_records
from tests.pages import REPO, pinned_torch

EXAMPLES = sorted(p.stem for p in (REPO / "advanced").glob("*.py"))
RELEASES = version_records.matrix_releases(REPO)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_states_what_its_card_shows(name):
    card = contract.read_script(REPO / "advanced" / f"{name}.py")
    assert card["problems"] == []
    assert card["title"] and card["summary"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_which_page_do_i_need_lists_every_page(name):
    table = (REPO / "start_here.rst").read_text()
    assert f":ref:`sphx_glr_tutorials_{name}.py`" in table, (
        f"start_here.rst has no row for {name}"
    )


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
    keys = [version_records.minor(r) for r in RELEASES]
    assert keys == sorted(set(keys), key=lambda v: tuple(map(int, v.split("."))))


@pytest.mark.parametrize("name", EXAMPLES)
def test_records_are_current_and_consistent(name):
    versions = version_records.read(REPO, REPO / "advanced" / f"{name}.py")
    assert versions.problems == [], versions.problems
