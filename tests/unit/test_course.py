"""The course (pagelib/course.py): the pages' order and summaries from
pagelib/course.toml, the order it gives the gallery, a page placed by a test."""

from pagelib import course
from pagelib.course import COURSE, CourseOrder

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
        '# a comment\na = "First."\nb = "Second."\n'
    )
    course.add_page(tmp_path, "c.py", 'Third, with "quotes".')
    # A page already listed (a scratch copy of a real page) is not listed twice,
    # which TOML would refuse.
    course.add_page(tmp_path, "a.py", "First, now last.")
    assert course.read(tmp_path) == {
        "b.py": "Second.",
        "c.py": 'Third, with "quotes".',
        "a.py": "First, now last.",
    }
