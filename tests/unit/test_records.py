"""A page's version records (pagelib/records.py): its floor, its verified
releases, and what makes them missing or stale."""

import shutil

import pytest

from pagelib import records
from tests.support.pages import SMALL_BELOW as BELOW
from tests.support.pages import page_source, write_page_records

PAGE = page_source(summary="Some prose.", body="x = 1\n")


@pytest.fixture
def project(matrix_project):
    source = matrix_project / "advanced" / "page.py"
    source.write_text(PAGE)
    below = {"result": "below-floor", "error": "needs PyTorch 2.8 or later"}
    write_page_records(
        matrix_project,
        "page",
        {BELOW: below, "2.7.1": below, "2.8.0": "pass", "2.9.1": "pass"},
    )
    return matrix_project, source


def test_current_records_give_the_floor_and_releases(project):
    srcdir, source = project
    versions = records.read(srcdir, source)
    assert versions.problems == []
    assert (versions.floor, versions.passed) == ("2.8", ["2.8", "2.9"])
    assert versions.trusted


def test_a_prose_edit_keeps_the_records_current(project):
    srcdir, source = project
    source.write_text(PAGE.replace("Some prose.", "Better prose, longer."))
    assert records.read(srcdir, source).problems == []


def test_a_code_edit_names_the_page_and_the_command(project):
    srcdir, source = project
    source.write_text(PAGE.replace("x = 1", "x = 2"))
    versions = records.read(srcdir, source)
    assert not versions.trusted
    (problem,) = versions.problems
    assert "code changed" in problem and "`make matrix PAGES=page`" in problem


def test_a_missing_release_is_reported(project):
    srcdir, source = project
    shutil.copy(source, source.with_name("other.py"))
    versions = records.read(srcdir, source.with_name("other.py"))
    assert "no record for PyTorch 2.6.0, 2.7.1, 2.8.0, 2.9.1" in versions.problems[0]


def test_a_stated_floor_that_was_not_measured_is_reported(project):
    srcdir, source = project
    source.write_text(PAGE.replace("* PyTorch 2.8 or later", "* PyTorch 2.7 or later"))
    (problem,) = records.read(srcdir, source).problems
    assert 'says "PyTorch 2.7 or later"' in problem and "floor is 2.8" in problem


def test_a_release_is_named_by_its_minor_version():
    assert records.minor("2.7.1+cu126") == "2.7"
