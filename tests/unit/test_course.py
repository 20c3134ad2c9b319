from pagelib.course import COURSE, CourseOrder

# Every page has a place and a one-line summary, and every entry a page: the
# page lint's checks (pagelib/pagelint.py, tests/unit/test_pagelint.py).


def test_listed_pages_come_first_in_course_order_then_new_ones_by_name():
    key = CourseOrder("")
    names = [*reversed(list(COURSE)), "zz_new.py", "aa_new.py"]
    ordered = sorted(names, key=key)
    assert ordered[: len(COURSE)] == list(COURSE)
    assert ordered[len(COURSE) :] == ["aa_new.py", "zz_new.py"]
