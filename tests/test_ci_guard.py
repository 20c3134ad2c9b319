"""Under CI the suite refuses to run narrowed (tests/conftest.py), except as
the fast lane, tests/unit, which is a whole run of its own."""

import sys

import pytest

from tests.support.helpers import run


def collect(*args):
    process = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
        ]
        + list(args),
        env={"CI": "true"},
        timeout=300,
    )
    return process.returncode, process.stdout + process.stderr


@pytest.mark.parametrize(
    "args, named",
    [
        (["tests/unit/test_course.py"], "tests/unit/test_course.py"),
        (["tests/test_site_build.py"], "tests/test_site_build.py"),
        (
            ["tests/unit", "tests/test_site_build.py"],
            "tests/unit, tests/test_site_build.py",
        ),
        (["-k", "course"], "-k course"),
        (["tests"], "no operator_checker/tests"),
    ],
)
def test_a_narrowed_run_is_refused_under_ci(args, named):
    returncode, output = collect(*args)
    assert returncode != 0, output[-2000:]
    assert f"CI runs the whole suite, but it was narrowed by: {named}" in output


def test_the_fast_lane_runs_under_ci():
    returncode, output = collect("tests/unit")
    assert returncode == 0, output[-2000:]


def test_the_whole_suite_runs_under_ci():
    returncode, output = collect()
    assert returncode == 0, output[-2000:]
    assert "operator_checker/tests/" in output and "tests/unit/" in output
