from pagelib.course import COURSE, CourseOrder
from tests.pages import REPO


def test_every_page_is_in_the_course_and_every_course_entry_is_a_page():
    pages = {path.name for path in (REPO / "advanced").glob("*.py")}
    assert pages == set(COURSE)


def test_listed_pages_come_first_in_course_order_then_new_ones_by_name():
    key = CourseOrder("")
    names = [*reversed(list(COURSE)), "zz_new.py", "aa_new.py"]
    ordered = sorted(names, key=key)
    assert ordered[: len(COURSE)] == list(COURSE)
    assert ordered[len(COURSE) :] == ["aa_new.py", "zz_new.py"]


def test_summaries_are_one_short_line():
    long = {page: s for page, s in COURSE.items() if "\n" in s or len(s) > 90}
    assert not long, f"summaries of more than one line of 90 characters: {long}"
