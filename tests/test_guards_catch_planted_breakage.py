"""Each guard of the suite still guards: planted breakage turns it red.

An audit of the suite planted small breakages and found eight that the tests
let through. Each is now caught by a test; this module keeps it that way. For
every breakage it makes a scratch copy of the project with only what the
affected tests need (a one-page site in one edition, or the one real page
concerned), checks
that the tests pass there as they are (the control), plants the breakage, and
asserts that the same tests fail, and that the test expected to catch it is
among the failures. A guard that stops guarding fails this module.

The copies run the suite's own tests with this interpreter, two at a time.
"""

import concurrent.futures
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field

import pytest

from tests.support.helpers import (
    REPO,
    claim_once_per_run,
    example_source,
    make,
    run,
    scratch_project,
    write_records,
)

TINY_PAGE = example_source(
    "A Tiny Page",
    "import matplotlib.pyplot as plt\n\n"
    "fig, ax = plt.subplots(figsize=(2, 2))\n"
    "ax.plot([0, 1], [1, 0])\n"
    "plt.show()",
)
SITE_TESTS = [
    "tests/test_site_build.py::test_build_finishes_without_warnings",
    "tests/test_site_build.py::test_every_example_has_a_page_with_its_figures",
    "tests/test_site_build.py::test_make_html_fails_on_a_sphinx_warning",
    "tests/test_landing_page.py::test_card_shows_the_page_title_summary_and_measured_floor",
    "tests/test_browser.py::test_requests_stay_on_the_serving_host",
    "tests/test_browser.py::test_every_page_loads_without_console_errors",
    "tests/test_reader_extensions.py::test_stamp_shows_the_recorded_run_not_the_installed_torch",
]
CROP_TESTS = [
    "tests/test_operator_errors.py::test_fake_kernels_reject_bad_input_while_compiling",
]
# The copy's build runs the page (its records, written for the page as it is
# after planting, keep the build from refusing it), and fails if the page does.
PERFORMANCE_TESTS = ["tests/test_site_build.py::test_build_finishes_without_warnings"]


def replace_once(path, old, new):
    text = path.read_text()
    assert text.count(old) == 1, f"cannot plant: {old!r} is not once in {path.name}"
    path.write_text(text.replace(old, new))


def replace_pattern(path, pattern, new):
    text = path.read_text()
    planted, count = re.subn(pattern, new, text, count=1, flags=re.M | re.S)
    assert count == 1, f"cannot plant: {pattern!r} not found in {path.name}"
    path.write_text(planted)


# -- The breakages ---------------------------------------------------------------


def drop_makefile_warnings_as_errors(project):
    replace_once(
        project / "Makefile",
        "SPHINXOPTS ?= -W --keep-going",
        "SPHINXOPTS ?= --keep-going",
    )


def fetch_and_fail_after_load(project):
    (project / "_static" / "late.js").write_text(
        "setTimeout(() => { fetch('https://cdn.example.org/late.js'); }, 3000);\n"
        "setTimeout(() => { throw new Error('planted late error'); }, 3000);\n"
    )
    with open(project / "conf.py", "a") as conf:
        conf.write('\nhtml_js_files = ["late.js"]\n')


def stamp_the_installed_torch(project):
    replace_once(
        project / "_ext" / "verified_stamp.py",
        'torch=record["torch"]',
        'torch=__import__("torch").__version__',
    )


def misnumber_the_cards(project):
    replace_once(
        project / "_ext" / "tutorial_cards.py",
        "format(step=step, version=version)",
        "format(step=step + 1, version=version)",
    )


def stop_drawing(project):
    page = project / "advanced" / "tiny_page.py"
    replace_once(page, "ax.plot([0, 1], [1, 0])\nplt.show()", "plt.close(fig)")
    write_records(project, "tiny_page")


def break_the_page_after_a_good_build(project):
    # A build that worked leaves its pages and notebooks behind; then the page
    # breaks. Tests must see the broken build, not the files of the good one.
    built = make("html", cwd=project, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    page = project / "advanced" / "tiny_page.py"
    page.write_text(page.read_text() + '\nraise RuntimeError("planted")\n')
    write_records(project, "tiny_page")


def drop_the_fake_kernel_check(project):
    replace_pattern(
        project / "advanced" / "python_custom_ops.py",
        r"(@crop_exact\.register_fake\ndef _\(pic, box\):\n)"
        r"    check_box\(pic, box\)\n",
        r"\1",
    )


def break_the_cpp_variant(project):
    # A C++ syntax error in the performance page's compiled variant: with a
    # compiler present, the page must fail rather than skip the variant.
    replace_pattern(
        project / "advanced" / "custom_op_performance.py",
        r"^(\s*)(TORCH_LIBRARY\w*\()",
        r"\1this is not C++;\n\1\2",
    )


@dataclass
class Planted:
    breakage: str
    project: str  # which planted project: "site", "crop" or "performance"
    plant: object
    caught_by: list = field(default_factory=list)


PLANTED = [
    Planted(
        "stale build output",
        "site",
        break_the_page_after_a_good_build,
        ["tests/test_site_build.py::test_every_example_has_a_page_with_its_figures"],
    ),
    Planted(
        "make html without -W",
        "site",
        drop_makefile_warnings_as_errors,
        ["tests/test_site_build.py::test_make_html_fails_on_a_sphinx_warning"],
    ),
    Planted(
        "a late request and a late error in the browser",
        "site",
        fetch_and_fail_after_load,
        [
            "tests/test_browser.py::test_requests_stay_on_the_serving_host",
            "tests/test_browser.py::test_every_page_loads_without_console_errors",
        ],
    ),
    Planted(
        "a fake kernel that no longer validates",
        "crop",
        drop_the_fake_kernel_check,
        CROP_TESTS,
    ),
    Planted(
        "a stamp naming the installed torch",
        "site",
        stamp_the_installed_torch,
        [
            "tests/test_reader_extensions.py::"
            "test_stamp_shows_the_recorded_run_not_the_installed_torch"
        ],
    ),
    Planted(
        "landing cards with the wrong footer",
        "site",
        misnumber_the_cards,
        [
            "tests/test_landing_page.py::"
            "test_card_shows_the_page_title_summary_and_measured_floor"
        ],
    ),
    Planted(
        "a compiled variant that fails to build",
        "performance",
        break_the_cpp_variant,
        PERFORMANCE_TESTS,
    ),
    Planted(
        "a page that stops drawing",
        "site",
        stop_drawing,
        ["tests/test_site_build.py::test_every_example_has_a_page_with_its_figures"],
    ),
]
SELECTIONS = {"site": SITE_TESTS, "crop": CROP_TESTS, "performance": PERFORMANCE_TESTS}


# -- Running them -------------------------------------------------------------------


def planted_project(folder, kind):
    """A copy of the project's machinery and tests with one page."""
    if kind == "site":
        name, source = "tiny_page", TINY_PAGE
    else:
        name = {"crop": "python_custom_ops", "performance": "custom_op_performance"}
        name = name[kind]
        source = (REPO / "advanced" / f"{name}.py").read_text()
        # The copy has no other page to link to: each link becomes its name.
        source = re.sub(r":ref:`sphx_glr_tutorials_(\w+)\.py`", r"``\1``", source)
    project = scratch_project(
        folder, {f"{name}.py": source}, files=["pyproject.toml"], folders=["tests"]
    )
    # The English edition alone: every breakage planted here is in what both
    # editions share or in the English one, and the real site's build and
    # survey (tests/test_browser.py) cover the Chinese one. A copy builds and
    # surveys half the pages.
    replace_pattern(project / "Makefile", r"^TRANSLATIONS := [^\n]*", "TRANSLATIONS :=")
    if kind != "performance":  # its records are written once it is planted
        write_records(project, name)
    return project


def run_selected(project, tests, env=None):
    """Run some of the suite's tests in ``project``; (passed?, failing ids)."""
    env = {"CI": "", "AXE_CORE": os.environ.get("AXE_CORE", ""), **(env or {})}
    process = run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider"]
        + tests,
        cwd=project,
        env=env,
        timeout=1800,
    )
    output = process.stdout + process.stderr
    failing = set(re.findall(r"^(?:FAILED|ERROR) (\S+?)(?:\[| - |$)", output, re.M))
    return process.returncode == 0, failing, output


@pytest.fixture(scope="session")
def outcomes(request, tmp_path_factory):
    """(passed?, failing test ids, output) of every control and planted run.

    A control runs all the tests of its kind of project; a planted breakage
    runs only the tests expected to catch it.
    """
    claim_once_per_run(request.config, "outcomes")
    root = tmp_path_factory.mktemp("planted")
    jobs = [
        (f"control-{kind}", kind, None, tests) for kind, tests in SELECTIONS.items()
    ]
    jobs += [
        (planted.breakage, planted.project, planted, planted.caught_by)
        for planted in PLANTED
    ]

    def work(job):
        label, kind, planted, tests = job
        start = time.perf_counter()
        try:
            project = planted_project(root / re.sub(r"\W+", "-", label), kind)
            if planted is not None:
                planted.plant(project)
            if kind == "performance":
                write_records(project, "custom_op_performance", real_matrix=True)
            # A planted copy compiles into a folder of its own: its broken C++
            # must not reach the extension cache the real build is using.
            env = (
                None
                if planted is None
                else {"TORCH_EXTENSIONS_DIR": f"{project}-extensions"}
            )
            outcome = run_selected(project, tests, env)
        except Exception:  # noqa: BLE001 - reported by the test of this job
            outcome = (None, set(), traceback.format_exc())
        print(f"{label}: {time.perf_counter() - start:.0f} s", flush=True)
        return label, outcome

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        return dict(pool.map(work, jobs))


@pytest.mark.parametrize("kind", sorted(SELECTIONS))
def test_guards_pass_on_an_intact_copy(outcomes, kind):
    passed, _failing, output = outcomes[f"control-{kind}"]
    assert passed is not None, f"the {kind} copy could not be made:\n{output}"
    assert passed, f"the {kind} tests fail without any breakage:\n{output[-6000:]}"


@pytest.mark.parametrize("planted", PLANTED, ids=[p.breakage for p in PLANTED])
def test_planted_breakage_turns_the_suite_red(outcomes, planted):
    passed, failing, output = outcomes[planted.breakage]
    assert passed is not None, f"could not plant {planted.breakage}:\n{output}"
    assert not passed, f"the suite stayed green with {planted.breakage}"
    missed = [test for test in planted.caught_by if test.split("[")[0] not in failing]
    assert not missed, (
        f"{planted.breakage}: expected {missed} to fail; failing: {sorted(failing)}\n"
        f"{output[-4000:]}"
    )
