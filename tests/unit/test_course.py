from pathlib import Path

from pagelib.course import COURSE, CourseOrder

REPO = Path(__file__).resolve().parents[2]


def test_every_page_is_in_the_course_and_every_course_entry_is_a_page():
    pages = {path.name for path in (REPO / "advanced").glob("*.py")}
    assert pages == set(COURSE)


def test_listed_pages_come_first_in_course_order_then_new_ones_by_name():
    key = CourseOrder("")
    names = [*reversed(list(COURSE)), "zz_new.py", "aa_new.py"]
    ordered = sorted(names, key=key)
    assert ordered[: len(COURSE)] == list(COURSE)
    assert ordered[len(COURSE) :] == ["aa_new.py", "zz_new.py"]


def test_summaries_are_one_line():
    assert all(
        "\n" not in summary and len(summary) < 100 for summary in COURSE.values()
    )
