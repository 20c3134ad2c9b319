"""The checker's FIXES name sections the course really has: every page
title, section and file that ``operator_checker.fixes`` names is one of
``advanced/``. (The package's own tests check which row a detail picks.)"""

import ast
import re

from operator_checker.fixes import FIXES, PAGES, see_for

from tests.support.pages import REPO

COURSE = REPO / "advanced"


def course_sections():
    """{page title: (file stem, {section titles})}, inline literals as plain text."""
    found = {}
    for page in sorted(COURSE.glob("*.py")):
        lines = page.read_text().splitlines()
        title = ast.get_docstring(ast.parse(page.read_text())).splitlines()[0]
        sections = {
            lines[i - 1][2:].replace("``", "").strip()
            for i in range(1, len(lines))
            if re.match(r"^# ([-~])\1{2,}\s*$", lines[i])
            and lines[i - 1].startswith("# ")
        }
        found[title] = (page.stem, sections)
    return found


def test_every_fix_names_a_section_of_the_course_and_the_file_of_its_page():
    sections = course_sections()
    assert len(sections) > 10, f"no pages of the course in {COURSE}"
    for _check, pattern, page, section in FIXES:
        if page is None:  # no section teaches it (PyTorch's own bug)
            assert section is None and see_for("compiled", pattern.lstrip("^")) == ""
            continue
        assert page in sections, f"FIXES names no page of the course: {page!r}"
        assert section in sections[page][1], f"{page!r} has no section {section!r}"
        assert PAGES.get(page) == sections[page][0], f"PAGES[{page!r}]"
