"""operator_checker.pytest: one test per check, from one report per operator.

The inner test sessions run in this process (pytester), on the operators
that conftest.py imported, with ``isolate=False``: a child process costs
seconds. The replay of captured torchvision samples runs isolated, as CI would.
"""

import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest
import torch
import torchvision
from checker_operators import scale
from operator_checker.options import CHECKS
from operator_checker.pytest import LIMITATION, operator_tests

from operator_checker import QUICK_CHECKS, capture_samples, check_operator, save_samples

OPERATOR_TESTS = """
import torch

from checker_operators import no_backward, wrong_fake
from operator_checker.pytest import operator_tests

FAST = dict(devices=["cpu"], dtypes=[torch.float32], isolate=False)
SAMPLES = [(torch.randn(3, 4), 2.0)]
made = []


def samples_of_wrong_fake():
    made.append(1)
    return SAMPLES


test_scale = operator_tests(
    "oc_test::scale",
    SAMPLES,
    only=["test_faketensor", "gradcheck"],
    skip={"gradcheck": "too slow for this suite"},
    **FAST,
)
test_wrong_fake = operator_tests(
    wrong_fake, samples_of_wrong_fake, only=["test_faketensor", "vmap"], **FAST
)
test_no_backward = operator_tests(no_backward, SAMPLES, only=["gradcheck"], **FAST)
test_integers = operator_tests(
    "aten::bitwise_not", [(torch.arange(6),)], only=["gradcheck"], **FAST
)
test_missing = operator_tests("oc_test::nothing", SAMPLES, only=["vmap"], **FAST)


def test_the_report_of_an_operator_was_made_once():
    assert made == [1]
"""


@pytest.fixture(scope="module")
def torch_warmed():
    """Run the inner session's checks once in this process first. pytester
    removes the modules that an inner session imported when it ends, and
    torch's lazily imported modules refuse to be imported a second time
    ("already registered")."""
    check_operator(
        scale,
        [(torch.randn(3, 4), 2.0)],
        only=["test_faketensor", "gradcheck", "vmap"],
        devices=["cpu"],
        dtypes=[torch.float32],
    )


@pytest.fixture(scope="module")
def inner_sessions():
    return {}


@pytest.fixture
def inner_session(torch_warmed, inner_sessions, request):
    """The outcome of a test session of OPERATOR_TESTS, and its JUnit XML's
    test cases by name; the session runs once for the module's tests."""
    if not inner_sessions:
        pytester = request.getfixturevalue("pytester")
        pytester.makepyfile(test_operators=OPERATOR_TESTS)
        result = pytester.runpytest("-p", "no:cacheprovider", "--junitxml=junit.xml")
        junit = ElementTree.parse(pytester.path / "junit.xml")
        cases = {case.get("name"): case for case in junit.iter("testcase")}
        inner_sessions["run"] = result, cases
    return inner_sessions["run"]


def test_each_check_is_a_test_passed_failed_skipped_or_errored(inner_session):
    result, cases = inner_session
    # Four operators with a report, and one without (16 errors). Of the 64
    # tests of the four, 7 pass (the made-once test passes too), 1 fails
    # (test_wrong_fake[test_faketensor]), and the rest were not checked.
    result.assert_outcomes(passed=7 + 1, failed=1, skipped=64 - 8, errors=16)
    operators = ("scale", "wrong_fake", "no_backward", "integers", "missing")
    assert set(cases) == {
        f"test_{op}[{check}]" for op in operators for check in CHECKS
    } | {"test_the_report_of_an_operator_was_made_once"}
    assert cases["test_scale[test_faketensor]"].find("*") is None  # passed


def test_a_failed_row_fails_its_test_with_the_variant_detail_and_fix(inner_session):
    result, cases = inner_session
    (failure,) = cases["test_wrong_fake[test_faketensor]"].iter("failure")
    said = failure.get("message")
    assert said.startswith("Failed: test_faketensor failed on 10 variants:\n")
    assert (
        "  #0 contiguous float32 cpu and 7 more: MetadataMismatchError: Shapes "
        "torch.Size([3, 4]) and torch.Size([2, 4]) are not equal!\n"
        "    fix: Troubleshooting Custom Operators > "
    ) in said
    result.stdout.fnmatch_lines(["FAILED test_operators.py::test_wrong_fake*"])


def test_limitations_pass_and_are_recorded_and_listed(inner_session):
    result, cases = inner_session
    case = cases["test_no_backward[gradcheck]"]
    assert case.find("failure") is None and case.find("skipped") is None
    recorded = [
        prop.get("value")
        for prop in case.iter("property")
        if prop.get("name") == LIMITATION
    ]
    assert len(recorded) == 1 and "no backward" in recorded[0]
    result.stdout.fnmatch_lines(
        [
            "*= operator_checker limitations =*",
            "test_operators.py::test_no_backward?gradcheck?: *no backward*",
        ]
    )


def test_what_was_not_checked_is_skipped_with_the_reason(inner_session):
    result, cases = inner_session

    def reason(name):
        return cases[name].find("skipped").get("message")

    assert reason("test_scale[gradcheck]") == "gradcheck: too slow for this suite"
    assert reason("test_scale[vmap]") == "vmap: left out by only="
    assert reason("test_integers[gradcheck]") == (
        "not applicable on #0 contiguous integers cpu: no floating-point argument"
    )


def test_an_operator_that_cannot_be_checked_errors_each_test_in_one_line(
    inner_session,
):
    result, cases = inner_session
    for name in (f"test_missing[{check}]" for check in CHECKS):
        (error,) = cases[name].iter("error")
        assert error.text.strip().splitlines() == [
            "oc_test::nothing: not checked: no operator oc_test::nothing "
            "(is the library that registers it imported? add --import MODULE)"
        ]


@pytest.mark.slow
def test_captured_torchvision_samples_replay_in_a_test_file(pytester):
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30.0]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    with capture_samples(torch.ops.torchvision.nms) as found:
        kept = torchvision.ops.nms(boxes, scores, 0.5)
    assert kept.tolist() == [0, 2]
    folder = pytester.mkdir("operator_checks")
    save_samples(folder / "nms_samples.pt", found)
    (folder / "test_nms.py").write_text(
        "import torch\n"
        "from operator_checker.pytest import operator_tests\n"
        "\n"
        "test_nms = operator_tests(\n"
        "    'torchvision::nms',\n"
        "    samples='nms_samples.pt',  # beside this file\n"
        "    imports=['torchvision'],\n"
        "    only=['test_faketensor'],\n"
        "    devices=['cpu'],\n"
        "    dtypes=[torch.float32],\n"
        ")\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2, skipped=14)
    result.stdout.fnmatch_lines(["*test_nms?test_faketensor? PASSED*"])


@pytest.mark.slow
def test_a_relative_imports_file_is_found_beside_the_test_file(pytester):
    folder = pytester.mkdir("operator_checks")
    (folder / "beside_ops.py").write_text(
        "import torch\n"
        "\n"
        "@torch.library.custom_op('beside::double', mutates_args=())\n"
        "def double(x: torch.Tensor) -> torch.Tensor:\n"
        "    return x * 2\n"
        "\n"
        "double.register_fake(lambda x: torch.empty_like(x))\n"
    )
    (folder / "test_beside.py").write_text(
        "import torch\n"
        "from operator_checker.pytest import operator_tests\n"
        "\n"
        "test_double = operator_tests(\n"
        "    'beside::double',\n"
        "    samples=lambda: [(torch.ones(2, 3),)],\n"
        "    imports=['beside_ops.py'],  # beside this file, not in the cwd\n"
        "    only=['test_schema'],\n"
        "    devices=['cpu'],\n"
        "    dtypes=[torch.float32],\n"
        ")\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-v")
    result.stdout.fnmatch_lines(["*test_double?test_schema? PASSED*"])


def test_options_are_checked_when_the_tests_are_defined():
    with pytest.raises(TypeError, match="unexpected keyword argument 'isolated'"):
        operator_tests("oc_test::scale", [], isolated=True)
    with pytest.raises(ValueError, match="only: 'gradchek' is not a check"):
        operator_tests("oc_test::scale", [], only=["gradchek"])


def test_loading_the_plugin_imports_no_torch():
    code = (
        "import sys, operator_checker.pytest as plugin\n"
        "assert plugin.pytest.main, 'not the real pytest'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_operators_with_the_same_imports_share_one_child_for_the_session(
    pytester, operators_file, monkeypatch
):
    from operator_checker import isolation

    started = []
    real_worker = isolation.Worker

    class CountedWorker(real_worker):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self.process.pid)

    monkeypatch.setattr(isolation, "Worker", CountedWorker)
    isolation._close_warm()
    pytester.makepyfile(
        test_three=(
            "import torch\n"
            "from operator_checker.pytest import operator_tests\n"
            "\n"
            f"SHARED = dict(imports=[{operators_file!r}], only=['test_faketensor'],\n"
            "              devices=['cpu'], dtypes=[torch.float32])\n"
            "SAMPLES = lambda: [(torch.randn(3, 4), 2.0)]\n"
            "test_scale = operator_tests('oc_test::scale', SAMPLES, **SHARED)\n"
            "test_fake = operator_tests('oc_test::wrong_fake', SAMPLES, **SHARED)\n"
            "test_back = operator_tests('oc_test::wrong_backward', SAMPLES, **SHARED)\n"
        )
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_faketensor")
    result.assert_outcomes(passed=2, failed=1, deselected=3 * (len(CHECKS) - 1))
    assert len(started) == 1, started
    isolation._close_warm()


SELECTED = """
import torch
from operator_checker.pytest import operator_tests

test_scale = operator_tests(
    "oc_test::scale",
    lambda: [(torch.randn(3, 4), 2.0)],
    imports=["checker_operators"],
    devices=["cpu"],
)
"""
READY = """
import pytest

ready = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    ready.append(item.function.operator_checker.result is not None)


def pytest_sessionfinish(session):
    tests = session.items[0].function.operator_checker
    with open("seen.txt", "w") as file:
        ran = sorted({r.check for r in tests.result.rows if r.outcome == "passed"})
        file.write(f"{all(ready)} {tests.quick} {' '.join(ran)}")
"""


@pytest.mark.slow
def test_k_narrows_the_work_and_the_check_runs_before_any_test(pytester):
    pytester.makepyfile(test_selected=SELECTED)
    pytester.makeconftest(READY)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "gradcheck or vmap",
                                "-rs")  # fmt: skip
    result.assert_outcomes(passed=3, deselected=len(CHECKS) - 3)
    ready, quick, *ran = (pytester.path / "seen.txt").read_text().split()
    # Only the selected checks ran (gradgradcheck's id holds "gradcheck" too:
    # it was selected and skipped by nothing), and before any test's setup.
    assert ran == ["gradcheck", "gradgradcheck", "vmap"]
    assert ready == "True" and quick == "False"


@pytest.mark.slow
def test_quick_from_the_command_line_or_the_ini_file(pytester):
    pytester.makepyfile(test_selected=SELECTED)
    pytester.makeconftest(READY)
    result = pytester.runpytest("-p", "no:cacheprovider", "--operator-checker-quick")
    result.assert_outcomes(passed=len(QUICK_CHECKS) + 1, skipped=len(CHECKS) - 6)
    assert (pytester.path / "seen.txt").read_text().split()[1] == "True"
    pytester.makeini("[pytest]\noperator_checker_quick = true\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=len(QUICK_CHECKS) + 1, skipped=len(CHECKS) - 6)
    # A skip is reported where the test is, not in the plugin.
    result.stdout.fnmatch_lines(["SKIPPED * test_selected.py:*quick*"])
    result.stdout.no_fnmatch_line("*operator_checker/pytest.py*")
