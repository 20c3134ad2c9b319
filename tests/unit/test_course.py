"""The course (pagelib/course.py): each page's table in pagelib/course.toml,
the order it gives the gallery, and a page placed by a test."""

import pytest

from pagelib import course
from pagelib.course import COURSE, PAGES, CourseOrder, Page

# Every page has a place and a one-line summary, and every entry a page: the
# page lint's checks (pagelib/pagelint.py, tests/unit/test_pagelint.py).


def test_listed_pages_come_first_in_course_order_then_new_ones_by_name():
    key = CourseOrder("")
    names = [*reversed(list(COURSE)), "zz_new.py", "aa_new.py"]
    ordered = sorted(names, key=key)
    assert ordered[: len(COURSE)] == list(COURSE)
    assert ordered[len(COURSE) :] == ["aa_new.py", "zz_new.py"]


def test_add_page_places_a_new_page_last_and_moves_a_listed_one(tmp_path):
    (tmp_path / "pagelib").mkdir()
    (tmp_path / course.COURSE_FILE).write_text(
        '# a comment\n[a]\nsummary = "First."\ncpu_only = true\n\n'
        '[b]\nsummary = "Second."\n'
    )
    course.add_page(tmp_path, "c.py", 'Third, with "quotes".')
    # A page already listed (a scratch copy of a real page) is not listed twice,
    # which TOML would refuse.
    course.add_page(tmp_path, "a.py", "First, now last.")
    assert course.read(tmp_path) == {
        "b.py": Page("Second."),
        "c.py": Page('Third, with "quotes".'),
        "a.py": Page("First, now last."),
    }


@pytest.mark.parametrize(
    ("table", "refusal"),
    [
        ('summary = "S."\ncpu_onyl = true\n', "[a] has cpu_onyl, which is not one of"),
        ('summary = "S."\nbuilds_wheels = "yes"\n', "[a] builds_wheels is not a bool"),
    ],
)
def test_a_setting_the_course_does_not_know_is_refused_by_name(
    tmp_path, table, refusal
):
    (tmp_path / "pagelib").mkdir()
    (tmp_path / course.COURSE_FILE).write_text(f"[a]\n{table}")
    with pytest.raises(ValueError, match=refusal.replace("[", r"\[")):
        course.read(tmp_path)


def test_each_fact_about_a_page_is_read_from_its_table():
    assert PAGES["sharp_edges.py"].cpu_only
    assert "sharp_edges" in course.cpu_only()
    assert "cpp_stable_abi" in course.builds_wheels()
    assert "python_custom_ops" not in course.builds_wheels()
